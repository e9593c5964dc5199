package adaptivebench_test

import (
	"flag"
	"image"
	"image/color"
	"image/draw"
	"image/png"
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

var plot = flag.String("adaptive.plot", "",
	"write a PNG of the limits in the simulation's follow run to this file")

// TestPlotFollow draws the limit of every limiter through the follow run
// of adaptivetest.Evaluate (capacity 100, 50, 100; four seconds each), with
// the capacity and the ±25 % band, when -adaptive.plot names a file:
//
//	go test -run PlotFollow ./adaptive -adaptive.plot ../../docs/adaptive-follow.png
func TestPlotFollow(t *testing.T) {
	if *plot == "" {
		t.Skip("no -adaptive.plot file")
	}
	const (
		w, h             = 900, 420
		left, top, right = 50, 20, 200
		bottom           = 40
		yMax             = 250.0
	)
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	length := adaptivetest.PhaseLength
	total := 3 * length
	x := func(d time.Duration) int { return left + int(float64(w-left-right)*float64(d)/float64(total)) }
	y := func(v float64) int { return h - bottom - int(float64(h-top-bottom)*min(v, yMax)/yMax) }
	line := func(x0, y0, x1, y1 int, c color.Color) {
		for i, n := 0, max(abs(x1-x0), abs(y1-y0), 1); i <= n; i++ {
			img.Set(x0+(x1-x0)*i/n, y0+(y1-y0)*i/n, c)
		}
	}
	text := func(px, py int, s string, c color.Color) {
		d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(px, py)}
		d.DrawString(s)
	}

	grey, band := color.Gray{Y: 120}, color.RGBA{R: 225, G: 235, B: 225, A: 255}
	for i, c := range []float64{100, 50, 100} {
		x0, x1 := x(time.Duration(i)*length), x(time.Duration(i+1)*length)
		draw.Draw(img, image.Rect(x0, y(c*1.25), x1, y(c*0.75)), image.NewUniform(band), image.Point{}, draw.Src)
		line(x0, y(c), x1, y(c), grey)
	}
	line(left, y(0), w-right, y(0), color.Black)
	line(left, y(0), left, y(yMax), color.Black)
	for v := 0.0; v <= yMax; v += 50 {
		line(left-4, y(v), left, y(v), color.Black)
		text(8, y(v)+4, formatInt(int(v)), color.Black)
	}
	for s := time.Duration(0); s <= total; s += 2 * time.Second {
		line(x(s), y(0), x(s), y(0)+4, color.Black)
		text(x(s)-8, h-bottom+18, formatInt(int(s/time.Second))+"s", color.Black)
	}
	text(left+4, top+10, "limit; capacity (grey) and its +/-25 % band; capacity 100, 50, 100", color.Black)

	colors := []color.Color{
		color.RGBA{R: 200, A: 255}, color.RGBA{R: 230, G: 140, A: 255}, color.RGBA{B: 200, A: 255},
		color.RGBA{G: 150, A: 255}, color.RGBA{G: 150, B: 150, A: 255}, color.RGBA{R: 150, B: 150, A: 255},
	}
	for i, p := range peers {
		c := colors[i%len(colors)]
		synctest.Test(t, func(t *testing.T) {
			res := adaptivetest.Run(p.sim(adaptivetest.MinLimit, adaptivetest.MaxLimit, adaptivetest.Capacity), adaptivetest.Config{
				ServiceTime: adaptivetest.ServiceTime,
				Phases: []adaptivetest.Phase{
					{Duration: length, Capacity: 100, Offered: 2},
					{Duration: length, Capacity: 50, Offered: 2},
					{Duration: length, Capacity: 100, Offered: 2},
				},
			})
			var at time.Duration
			prev := -1
			for _, ph := range res {
				for _, l := range ph.Trace {
					if prev >= 0 {
						line(x(at-adaptivetest.TraceEvery), y(float64(prev)), x(at), y(float64(l)), c)
					}
					prev = l
					at += adaptivetest.TraceEvery
				}
			}
		})
		line(w-right+10, top+20+18*i, w-right+30, top+20+18*i, c)
		text(w-right+36, top+24+18*i, p.name, c)
	}

	f, err := os.Create(*plot)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, img))
	require.NoError(t, f.Close())
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
