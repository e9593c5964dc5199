package overloadbench_test

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// layerColors gives each layer a colour of its own; the sheddable part of a
// goodput bar is the same colour, lighter.
var layerColors = map[string]color.RGBA{
	"gate-fifo":  {R: 230, G: 140, A: 255},
	"gate-codel": {R: 200, A: 255},
	"failsafe":   {B: 200, A: 255},
	"netflix":    {G: 150, A: 255},
}

func lighter(c color.RGBA) color.RGBA {
	return color.RGBA{R: c.R/3 + 170, G: c.G/3 + 170, B: c.B/3 + 170, A: 255}
}

// plot draws two panels: goodput by layer and load (critical dark,
// sheddable light, a black tick at what critical got alone), and the p99
// of the requests served, with a dashed line at twice the unloaded p99.
func plot(t *testing.T, file string, unloaded summary, results []summary, alone map[string]summary) {
	const w, h = 1000, 420
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	var mixed []summary
	for _, s := range results {
		if _, ok := alone[s.layer+s.load]; ok {
			mixed = append(mixed, s)
		}
	}
	p := panel{img: img, x0: 60, x1: w/2 - 20, y0: 60, y1: h - 40, yMax: perSecond * 1.1}
	p.axes([2]string{fmt.Sprintf("goodput, requests/s (capacity %.0f)", perSecond),
		"dark: critical, light: sheddable, tick: critical alone"}, 10)
	group := func(i int) int {
		if mixed[i].load != mixed[0].load {
			return 1
		}
		return 0
	}
	for i, s := range mixed {
		col := layerColors[s.layer]
		x := p.bar(i, len(mixed), group(i))
		p.rect(x, len(mixed), 0, s.goodput[critical], col)
		p.rect(x, len(mixed), s.goodput[critical], s.goodput[critical]+s.goodput[sheddable], lighter(col))
		a := alone[s.layer+s.load].goodput[critical]
		p.hline(x-2, x+p.barWidth(len(mixed))+2, a, color.Black, false)
		p.label(x, s.load)
	}
	maxP99 := 2 * ms(unloaded.p99)
	for _, s := range mixed {
		maxP99 = max(maxP99, ms(s.p99))
	}
	q := panel{img: img, x0: w/2 + 60, x1: w - 150, y0: 60, y1: h - 40, yMax: maxP99 * 1.1}
	q.axes([2]string{"p99 of the requests served, ms", "dashed: twice the unloaded p99"}, 100)
	for i, s := range mixed {
		x := q.bar(i, len(mixed), group(i))
		q.rect(x, len(mixed), 0, ms(s.p99), layerColors[s.layer])
		q.label(x, s.load)
	}
	q.hline(q.x0, q.x1, 2*ms(unloaded.p99), color.Black, true)
	seen := map[string]bool{}
	row := 0
	for _, s := range mixed {
		if seen[s.layer] {
			continue
		}
		seen[s.layer] = true
		y := 80 + 20*row
		draw.Draw(img, image.Rect(w-130, y-10, w-115, y), image.NewUniform(layerColors[s.layer]), image.Point{}, draw.Src)
		text(img, w-108, y, s.layer, color.Black)
		row++
	}
	f, err := os.Create(file)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, img))
	require.NoError(t, f.Close())
}

type panel struct {
	img            *image.RGBA
	x0, x1, y0, y1 int
	yMax           float64
}

func (p panel) y(v float64) int {
	return p.y1 - int(float64(p.y1-p.y0)*min(v, p.yMax)/p.yMax)
}

func (p panel) axes(title [2]string, step float64) {
	for x := p.x0; x <= p.x1; x++ {
		p.img.Set(x, p.y1, color.Black)
	}
	for y := p.y0; y <= p.y1; y++ {
		p.img.Set(p.x0, y, color.Black)
	}
	for v := 0.0; v <= p.yMax; v += step {
		for x := p.x0 - 4; x < p.x0; x++ {
			p.img.Set(x, p.y(v), color.Black)
		}
		text(p.img, p.x0-45, p.y(v)+4, fmt.Sprintf("%5.0f", v), color.Black)
	}
	text(p.img, p.x0-40, p.y0-36, title[0], color.Black)
	text(p.img, p.x0-40, p.y0-20, title[1], color.Black)
}

// slot is the width given to each of n bars, with one more slot's gap
// between the two loads' groups.
func (p panel) slot(n int) int { return (p.x1 - p.x0) / (n + 2) }

func (p panel) barWidth(n int) int { return p.slot(n) * 2 / 3 }

// bar returns the left edge of the i-th of n bars, with a slot's gap before
// the bars of the second load (group 1).
func (p panel) bar(i, n, group int) int {
	return p.x0 + p.slot(n)/2 + (i+group)*p.slot(n)
}

func (p panel) rect(x, n int, from, to float64, col color.Color) {
	draw.Draw(p.img, image.Rect(x, p.y(to), x+p.barWidth(n), p.y(from)), image.NewUniform(col), image.Point{}, draw.Src)
}

func (p panel) hline(x0, x1 int, v float64, col color.Color, dashed bool) {
	for x := x0; x <= x1; x++ {
		if !dashed || x/6%2 == 0 {
			p.img.Set(x, p.y(v), col)
			p.img.Set(x, p.y(v)+1, col)
		}
	}
}

func (p panel) label(x int, load string) {
	text(p.img, x, p.y1+16, strings.TrimSuffix(load, "x")+"x", color.Black)
}

func text(img *image.RGBA, px, py int, s string, col color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(px, py)}
	d.DrawString(s)
}
