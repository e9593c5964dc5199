// Package stat has the statistics that the benchmark tools share.
package stat

import (
	"cmp"
	"math"
	"slices"
)

// Quantile returns the q-quantile of sorted, interpolating linearly between
// the two nearest samples; Quantile(sorted, 0.5) is the median.
func Quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (pos-float64(i))*(sorted[i+1]-sorted[i])
}

// MannWhitney returns the two-sided p-value of the Mann–Whitney U test of
// x against y, by the normal approximation with a correction for ties,
// which is close enough for the tens of samples a comparison pools.
func MannWhitney(x, y []float64) float64 {
	type sample struct {
		v     float64
		fromX bool
	}
	all := make([]sample, 0, len(x)+len(y))
	for _, v := range x {
		all = append(all, sample{v, true})
	}
	for _, v := range y {
		all = append(all, sample{v, false})
	}
	slices.SortFunc(all, func(a, b sample) int { return cmp.Compare(a.v, b.v) })
	n1, n2 := float64(len(x)), float64(len(y))
	n := n1 + n2
	var rankSumX, ties float64
	for i := 0; i < len(all); {
		j := i
		for j+1 < len(all) && all[j+1].v == all[i].v {
			j++
		}
		rank := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			if all[k].fromX {
				rankSumX += rank
			}
		}
		t := float64(j - i + 1)
		ties += t*t*t - t
		i = j + 1
	}
	u := rankSumX - n1*(n1+1)/2
	variance := n1 * n2 / 12 * (n + 1 - ties/(n*(n-1)))
	if variance <= 0 {
		return 1
	}
	z := (u - n1*n2/2) / math.Sqrt(variance)
	return math.Erfc(math.Abs(z) / math.Sqrt2)
}
