package adaptivebench_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/adaptive/adaptivetest/wire"
)

var (
	wireIn = flag.String("adaptive.wirein", "",
		"read the wire scenarios' verdicts from this file (lines of JSON, wire.AppendRecord's)")
	wireTable = flag.String("adaptive.wiretable", "",
		"write the wire scenarios' tables to this file")
	wirePlot = flag.String("adaptive.wireplot", "",
		"write a PNG of the limits through the wire scenarios of the issue's failures to this file")
)

// The order of the tables' rows and columns.
var (
	wireStacks      = []string{"Handler", "Transport", "gRPC server", "gRPC client"}
	wireControllers = []string{"Gradient2", "AIMD", "Vegas"}
)

// TestWireReport reads the verdicts the wire scenarios wrote
// (ADAPTIVE_WIRE=full ADAPTIVE_WIRE_OUT=FILE in package adaptive and module
// adaptivegrpc) and writes the tables docs/adaptive.md quotes and the plot
// it shows, when -adaptive.wirein names the file:
//
//	go test -run WireReport ./adaptive -adaptive.wirein FILE -adaptive.wiretable OUT -adaptive.wireplot PNG
//
// bench/run.sh adaptivewire runs the scenarios and this.
func TestWireReport(t *testing.T) {
	if *wireIn == "" {
		t.Skip("no -adaptive.wirein file")
	}
	records := readRecords(t, *wireIn)
	require.NotEmpty(t, records)
	if *wireTable != "" {
		require.NoError(t, os.WriteFile(*wireTable, []byte(wireTables(records)), 0o644))
	}
	if *wirePlot != "" {
		writePNG(t, *wirePlot, wireChart(t, records))
	}
}

func readRecords(t *testing.T, file string) []wire.Record {
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var out []wire.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r wire.Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

// find returns the record of a scenario, stack, controller and network,
// and whether there is one.
func find(records []wire.Record, scenario, stack, ctrl, network string) (wire.Record, bool) {
	for _, r := range records {
		if r.Scenario == scenario && r.Stack == stack && r.Controller == ctrl && r.Network == network {
			return r, true
		}
	}
	return wire.Record{}, false
}

// wireTables formats, for each network, which controller passes which
// scenario through which stack, and every verdict's figures.
func wireTables(records []wire.Record) string {
	var b strings.Builder
	var scenarios []string
	fmt.Fprint(&b, "## the scenarios and their criteria (full length)\n\n| scenario | criterion |\n| --- | --- |\n")
	for _, sc := range wire.Scenarios(wire.Full) {
		scenarios = append(scenarios, sc.Name)
		fmt.Fprintf(&b, "| %s | %s |\n", sc.Name, sc.Criterion)
	}
	fmt.Fprintln(&b)
	for _, network := range []string{"loopback", "fake time"} {
		fmt.Fprintf(&b, "## %s: pass or miss, through Handler / Transport / gRPC server / gRPC client\n\n", network)
		fmt.Fprintf(&b, "| scenario | %s |\n| --- |%s\n", strings.Join(wireControllers, " | "), strings.Repeat(" :---: |", len(wireControllers)))
		for _, sc := range scenarios {
			fmt.Fprintf(&b, "| %s |", sc)
			for _, c := range wireControllers {
				var cells []string
				for _, st := range wireStacks {
					r, ok := find(records, sc, st, c, network)
					switch {
					case !ok:
						cells = append(cells, "–")
					case !r.Valid:
						cells = append(cells, "invalid")
					default:
						cells = append(cells, passOrMiss(r.Pass))
					}
				}
				fmt.Fprintf(&b, " %s |", strings.Join(cells, " / "))
			}
			fmt.Fprintln(&b)
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprint(&b, "## every verdict's figures: the limiter's to the fixed reference's\n\n")
	fmt.Fprintln(&b, "| network | scenario | stack | controller | verdict | figures | limit, per phase: low–high (mean) | goodput /s, per phase: limiter / reference |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, network := range []string{"loopback", "fake time"} {
		for _, sc := range scenarios {
			for _, st := range wireStacks {
				for _, c := range wireControllers {
					r, ok := find(records, sc, st, c, network)
					if !ok {
						continue
					}
					verdict := passOrMiss(r.Pass)
					if !r.Valid {
						verdict = "invalid: " + r.Invalid
					}
					var limits, goodput []string
					for i, p := range r.Subject {
						limits = append(limits, fmt.Sprintf("%s %d–%d (%.1f)", p.Name, p.Low, p.High, p.Mean))
						goodput = append(goodput, fmt.Sprintf("%s %.0f / %.0f", p.Name, p.Goodput, r.Reference[i].Goodput))
					}
					fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", network, sc, st, c, verdict, r.Figures(),
						strings.Join(limits, "; "), strings.Join(goodput, "; "))
				}
			}
		}
	}
	return b.String()
}

// plotted are the scenarios the plot shows, one panel each: the failures
// that only the real stack showed.
var plotted = []string{"hang until the client gives up", "fast errors", "latency step", "quiet hours, 1 in flight", "total failure", "short deadlines"}

// wireColors are the plot's series, one colour each: the reference and
// the three controllers.
var wireColors = map[string]color.Color{
	"reference": color.Gray{Y: 110},
	"Gradient2": color.RGBA{R: 0, G: 90, B: 200, A: 255},
	"AIMD":      color.RGBA{R: 230, G: 120, B: 0, A: 255},
	"Vegas":     color.RGBA{R: 0, G: 150, B: 60, A: 255},
}

// wireChart draws, for each scenario of plotted, the limit of every
// controller through Handler over loopback, beside the reference's fixed
// limit, with the failure's stretch shaded.
func wireChart(t *testing.T, records []wire.Record) image.Image {
	const w, h = 900, 260
	all := image.NewRGBA(image.Rect(0, 0, w, h*len(plotted)))
	for i, sc := range plotted {
		var rs []wire.Record
		for _, c := range wireControllers {
			if r, ok := find(records, sc, "Handler", c, "loopback"); ok {
				rs = append(rs, r)
			}
		}
		require.NotEmpty(t, rs, "no loopback verdict of %q through Handler", sc)
		phases := rs[0].Subject
		var total time.Duration
		for _, p := range phases {
			total += p.Duration
		}
		yMax := 25.0
		for _, r := range rs {
			for _, p := range r.SubjectTrace {
				yMax = max(yMax, float64(p.Limit))
			}
		}
		yMax = min(yMax, 60)
		c := newWireChart(w, h, total, yMax, sc+": limit through Handler over loopback (failure shaded)")
		// The phases between the first and the last are the failure's; a
		// scenario of one or two phases (the quiet hours) has none.
		if len(phases) > 2 {
			for _, p := range phases[1 : len(phases)-1] {
				c.shade(p.Start, p.Start+p.Duration)
			}
		}
		c.axes()
		c.series(0, "reference", rs[0].ReferenceTrace)
		for j, r := range rs {
			c.series(j+1, r.Controller, r.SubjectTrace)
		}
		draw.Draw(all, image.Rect(0, h*i, w, h*(i+1)), c.img, image.Point{}, draw.Src)
	}
	return all
}

// timeChart is a plot of limits against time.
type timeChart struct {
	*chart
	span time.Duration
}

func newWireChart(w, h int, span time.Duration, yMax float64, title string) *timeChart {
	c := &chart{img: image.NewRGBA(image.Rect(0, 0, w, h)), w: w, h: h, left: 50, top: 20, right: 170, bottom: 40, yMax: yMax, total: span}
	draw.Draw(c.img, c.img.Bounds(), image.White, image.Point{}, draw.Src)
	c.text(c.left+4, c.top+10, title, color.Black)
	return &timeChart{c, span}
}

func (c *timeChart) shade(from, to time.Duration) {
	draw.Draw(c.img, image.Rect(c.x(from), c.y(c.yMax), c.x(to), c.y(0)), image.NewUniform(color.RGBA{R: 250, G: 225, B: 225, A: 255}), image.Point{}, draw.Src)
}

func (c *timeChart) axes() {
	c.line(c.left, c.y(0), c.w-c.right, c.y(0), color.Black)
	c.line(c.left, c.y(0), c.left, c.y(c.yMax), color.Black)
	step := 5.0
	if c.yMax > 30 {
		step = 10
	}
	for v := 0.0; v <= c.yMax; v += step {
		c.line(c.left-4, c.y(v), c.left, c.y(v), color.Black)
		c.text(8, c.y(v)+4, formatInt(int(v)), color.Black)
	}
	tick := time.Second
	if c.span > 15*time.Second {
		tick = 5 * time.Second
	}
	for s := time.Duration(0); s <= c.span; s += tick {
		c.line(c.x(s), c.y(0), c.x(s), c.y(0)+4, color.Black)
		c.text(c.x(s)-8, c.h-c.bottom+18, formatInt(int(s/time.Second))+"s", color.Black)
	}
}

// series draws a limit's trace as the i-th line, with its legend.
func (c *timeChart) series(i int, name string, trace []wire.Point) {
	col := wireColors[name]
	for j := 1; j < len(trace); j++ {
		a, b := trace[j-1], trace[j]
		c.line(c.x(a.At), c.y(float64(a.Limit)), c.x(b.At), c.y(float64(a.Limit)), col)
		c.line(c.x(b.At), c.y(float64(a.Limit)), c.x(b.At), c.y(float64(b.Limit)), col)
	}
	label := name
	if name == "reference" {
		label = "fixed reference"
	}
	c.line(c.w-c.right+10, c.top+20+18*i, c.w-c.right+30, c.top+20+18*i, col)
	c.line(c.w-c.right+10, c.top+21+18*i, c.w-c.right+30, c.top+21+18*i, col)
	c.text(c.w-c.right+36, c.top+24+18*i, label, col)
}
