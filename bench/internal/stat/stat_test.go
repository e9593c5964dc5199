package stat

import (
	"math"
	"testing"
)

// near reports whether got is within tol of want.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestQuantile(t *testing.T) {
	for _, c := range []struct {
		sorted []float64
		q      float64
		want   float64
	}{
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 0.25, 1.75},
		{[]float64{1, 2, 3, 4}, 0.5, 2.5},
		{[]float64{1, 2, 3, 4}, 1, 4},
		{[]float64{7}, 0.75, 7},
	} {
		if got := Quantile(c.sorted, c.q); !near(got, c.want, 1e-9) {
			t.Errorf("Quantile(%v, %v) = %v, want %v", c.sorted, c.q, got, c.want)
		}
	}
}

func TestMannWhitney(t *testing.T) {
	// U = 0 for three against three: z = −4.5/√5.25, p = 0.0495.
	if p := MannWhitney([]float64{1, 2, 3}, []float64{4, 5, 6}); !near(p, 0.0495, 0.0005) {
		t.Errorf("separated samples: p = %.4f, want 0.0495", p)
	}
	same := []float64{1, 2, 3, 4, 5}
	if p := MannWhitney(same, same); !near(p, 1, 1e-9) {
		t.Errorf("identical samples: p = %.4f, want 1", p)
	}
	var low, high []float64
	for i := range 30 {
		low = append(low, 1+float64(i)/100)
		high = append(high, 1.2+float64(i)/100)
	}
	if p := MannWhitney(low, high); p > 0.001 {
		t.Errorf("shifted samples of 30: p = %.4f, want < 0.001", p)
	}
}
