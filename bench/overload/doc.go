// Package overloadbench runs the overload experiment of package overload
// through real HTTP: a backend of fixed capacity on loopback, offered two
// and four times what it can serve by open-loop clients, half of the
// requests critical and half sheddable, behind each of the admission
// layers compared (the overload gate in arrival order and in its overload
// mode, failsafe-go's prioritized limiter, and a model of Netflix's
// partitioned limiter). The peers are dependencies of the benchmark module
// only. Run
//
//	go test -run Experiment -overload.experiment -overload.long -overload.out ../results/overload.txt -overload.plot ../../docs/overload.png ./overload
//
// from the bench directory (bench/run.sh overload does); docs/overload.md
// reports the figures.
package overloadbench
