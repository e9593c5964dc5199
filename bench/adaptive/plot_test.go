package adaptivebench_test

import (
	"flag"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/atomicsem/atomicsem/adaptive/adaptivetest"
)

var (
	plot = flag.String("adaptive.plot", "",
		"write a PNG of the limits in the simulation's follow run to this file")
	failurePlot = flag.String("adaptive.failureplot", "",
		"write a PNG of the limits in the total-failure and hang scenarios to this file")
)

// TestPlotFollow draws the limit of every limiter through the follow run
// of adaptivetest.Evaluate (capacity 100, 50, 100; four seconds each), with
// the capacity and the ±25 % band, when -adaptive.plot names a file:
//
//	go test -run PlotFollow ./adaptive -adaptive.plot ../../docs/adaptive-follow.png
func TestPlotFollow(t *testing.T) {
	if *plot == "" {
		t.Skip("no -adaptive.plot file")
	}
	length := adaptivetest.PhaseLength
	cfg := adaptivetest.Config{
		ServiceTime: adaptivetest.ServiceTime,
		Phases: []adaptivetest.Phase{
			{Duration: length, Capacity: 100, Offered: 2},
			{Duration: length, Capacity: 50, Offered: 2},
			{Duration: length, Capacity: 100, Offered: 2},
		},
	}
	img := newChart(900, 420, cfg.Phases, 250, "limit; capacity (grey) and its +/-25 % band; capacity 100, 50, 100")
	for i, p := range peers {
		synctest.Test(t, func(t *testing.T) {
			img.trace(i, p.name, adaptivetest.Run(p.sim(cfg.ServiceTime, adaptivetest.MinLimit, adaptivetest.MaxLimit, adaptivetest.Capacity), cfg))
		})
	}
	img.write(t, *plot)
}

// TestPlotFailures draws the limit of every limiter through two of
// adaptivetest's failure scenarios, total failure and hang (healthy for
// 4 s, failing for 10 s, healthy again for 6 s), one panel each, when
// -adaptive.failureplot names a file:
//
//	go test -run PlotFailures ./adaptive -adaptive.failureplot ../../docs/adaptive-failure.png
func TestPlotFailures(t *testing.T) {
	if *failurePlot == "" {
		t.Skip("no -adaptive.failureplot file")
	}
	var panels []*chart
	for _, sc := range adaptivetest.Scenarios() {
		if sc.Name != "total failure" && sc.Name != "hang" {
			continue
		}
		c := newChart(900, 360, sc.Config.Phases, 250,
			sc.Name+": limit; capacity (grey) and its +/-25 % band; failing from 4 s to 14 s")
		for i, p := range peers {
			synctest.Test(t, func(t *testing.T) {
				c.trace(i, p.name, adaptivetest.Run(p.sim(sc.Config.ServiceTime, sc.Min, sc.Max, sc.Initial), sc.Config))
			})
		}
		panels = append(panels, c)
	}
	require.Len(t, panels, 2)
	all := image.NewRGBA(image.Rect(0, 0, 900, 720))
	for i, c := range panels {
		draw.Draw(all, image.Rect(0, 360*i, 900, 360*(i+1)), c.img, image.Point{}, draw.Src)
	}
	writePNG(t, *failurePlot, all)
}

// chart is a plot of limits against time over a run's phases, with the
// capacity of each phase and its ±25 % band.
type chart struct {
	img                      *image.RGBA
	w, h                     int
	left, top, right, bottom int
	yMax                     float64
	total                    time.Duration
}

func newChart(w, h int, phases []adaptivetest.Phase, yMax float64, title string) *chart {
	c := &chart{img: image.NewRGBA(image.Rect(0, 0, w, h)), w: w, h: h, left: 50, top: 20, right: 200, bottom: 40, yMax: yMax}
	draw.Draw(c.img, c.img.Bounds(), image.White, image.Point{}, draw.Src)
	for _, ph := range phases {
		c.total += ph.Duration
	}
	grey, band := chartGrey, chartBand
	var at time.Duration
	for _, ph := range phases {
		x0, x1 := c.x(at), c.x(at+ph.Duration)
		capacity := float64(ph.Capacity)
		draw.Draw(c.img, image.Rect(x0, c.y(capacity*1.25), x1, c.y(capacity*0.75)), image.NewUniform(band), image.Point{}, draw.Src)
		c.line(x0, c.y(capacity), x1, c.y(capacity), grey)
		at += ph.Duration
	}
	c.line(c.left, c.y(0), w-c.right, c.y(0), color.Black)
	c.line(c.left, c.y(0), c.left, c.y(yMax), color.Black)
	for v := 0.0; v <= yMax; v += 50 {
		c.line(c.left-4, c.y(v), c.left, c.y(v), color.Black)
		c.text(8, c.y(v)+4, formatInt(int(v)), color.Black)
	}
	for s := time.Duration(0); s <= c.total; s += 2 * time.Second {
		c.line(c.x(s), c.y(0), c.x(s), c.y(0)+4, color.Black)
		c.text(c.x(s)-8, h-c.bottom+18, formatInt(int(s/time.Second))+"s", color.Black)
	}
	c.text(c.left+4, c.top+10, title, color.Black)
	return c
}

// The chart's own colours, which no series may be mistaken for.
var (
	chartGrey = color.RGBA{R: 120, G: 120, B: 120, A: 255} // the capacity
	chartBand = color.RGBA{R: 225, G: 235, B: 225, A: 255} // the ±25 % band
)

// palette holds one colour per series of a chart, all told apart from each
// other and from the chart's own colours (TestPaletteColoursAreDistinct):
// d3's category10 without its grey, then navy, maroon and teal. A chart
// with more series than colours fails, rather than draw two alike.
var palette = []color.RGBA{
	{R: 31, G: 119, B: 180, A: 255},  // blue
	{R: 255, G: 127, B: 14, A: 255},  // orange
	{R: 44, G: 160, B: 44, A: 255},   // green
	{R: 214, G: 39, B: 40, A: 255},   // red
	{R: 148, G: 103, B: 189, A: 255}, // purple
	{R: 140, G: 86, B: 75, A: 255},   // brown
	{R: 227, G: 119, B: 194, A: 255}, // pink
	{R: 23, G: 190, B: 207, A: 255},  // cyan
	{R: 188, G: 189, B: 34, A: 255},  // olive
	{R: 0, G: 0, B: 128, A: 255},     // navy
	{R: 128, G: 0, B: 0, A: 255},     // maroon
	{R: 0, G: 128, B: 128, A: 255},   // teal
}

// seriesColour returns the colour of a chart's i-th series, and panics if
// the palette has none left.
func seriesColour(i int) color.RGBA {
	if i >= len(palette) {
		panic("plot: more series than colours in the palette; add colours to it")
	}
	return palette[i]
}

// colourDistance is the "redmean" approximation of how far apart two
// colours look (a weighted Euclidean distance in RGB, weighted by the mean
// red level), on a scale where black and white are 765 apart.
func colourDistance(a, b color.RGBA) float64 {
	r := (float64(a.R) + float64(b.R)) / 2
	dr, dg, db := float64(a.R)-float64(b.R), float64(a.G)-float64(b.G), float64(a.B)-float64(b.B)
	return math.Sqrt((2+r/256)*dr*dr + 4*dg*dg + (2+(255-r)/256)*db*db)
}

// trace draws the limit through res as the i-th line, with its legend.
func (c *chart) trace(i int, name string, res []adaptivetest.PhaseResult) {
	col := seriesColour(i)
	var at time.Duration
	prev := -1
	for _, ph := range res {
		for _, l := range ph.Trace {
			if prev >= 0 {
				c.line(c.x(at-adaptivetest.TraceEvery), c.y(float64(prev)), c.x(at), c.y(float64(l)), col)
			}
			prev = l
			at += adaptivetest.TraceEvery
		}
	}
	c.line(c.w-c.right+10, c.top+20+18*i, c.w-c.right+30, c.top+20+18*i, col)
	c.text(c.w-c.right+36, c.top+24+18*i, name, col)
}

func (c *chart) x(d time.Duration) int {
	return c.left + int(float64(c.w-c.left-c.right)*float64(d)/float64(c.total))
}

func (c *chart) y(v float64) int {
	return c.h - c.bottom - int(float64(c.h-c.top-c.bottom)*min(v, c.yMax)/c.yMax)
}

func (c *chart) line(x0, y0, x1, y1 int, col color.Color) {
	for i, n := 0, max(abs(x1-x0), abs(y1-y0), 1); i <= n; i++ {
		c.img.Set(x0+(x1-x0)*i/n, y0+(y1-y0)*i/n, col)
	}
}

func (c *chart) text(px, py int, s string, col color.Color) {
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(px, py)}
	d.DrawString(s)
}

func (c *chart) write(t *testing.T, file string) { writePNG(t, file, c.img) }

func writePNG(t *testing.T, file string, img image.Image) {
	f, err := os.Create(file)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, img))
	require.NoError(t, f.Close())
}

// TestPaletteColoursAreDistinct checks that every two series colours, and
// every series colour and the chart's own (white, black, the capacity's
// grey, the band), are at least 100 apart by colourDistance (black and
// white are 765 apart), and that the palette has a colour for each limiter
// the charts draw.
func TestPaletteColoursAreDistinct(t *testing.T) {
	require.GreaterOrEqual(t, len(palette), len(peers), "a colour for each limiter")
	own := map[string]color.RGBA{
		"white": {R: 255, G: 255, B: 255, A: 255}, "black": {A: 255}, "grey": chartGrey, "band": chartBand,
	}
	for i, a := range palette {
		for j, b := range palette[:i] {
			require.GreaterOrEqual(t, colourDistance(a, b), 100.0, "series %d and %d", j, i)
		}
		for name, b := range own {
			require.GreaterOrEqual(t, colourDistance(a, b), 100.0, "series %d and the chart's %s", i, name)
		}
	}
	require.Panics(t, func() { seriesColour(len(palette)) })
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func formatInt(v int) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}
