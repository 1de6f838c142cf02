package normalize

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// The fast paths of the hot loop must give exactly what the general code
// gives.
func TestFixedStringMatchesStringFixed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	coefs := []int64{0, 1, -1, 5, -5, 10, 99, -100, 123450, -304, 999999999999999999, -999999999999999999, 1 << 62}
	for range 300 {
		coefs = append(coefs, r.Int64N(1e12)-5e11, r.Int64N(1000)-500)
	}
	for _, c := range coefs {
		for exp := int32(-20); exp <= 20; exp++ {
			d := decimal.New(c, exp)
			for scale := int32(-1); scale <= 20; scale++ {
				want := d.StringFixed(scale)
				if scale < 0 {
					want = d.String()
				}
				if got := moneyString(d, scale); got != want {
					t.Fatalf("moneyString(%s (%d e%d), %d) = %q, want %q", d, c, exp, scale, got, want)
				}
			}
		}
	}
}

func TestDecimalOfMatchesNewFromString(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return b.String()
	}
	for range 50000 {
		i, f := digits(1+r.IntN(20)), digits(r.IntN(12))
		num := i
		if f != "" {
			num += "." + f
		}
		want, err := decimal.NewFromString(num)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decimalOf(i, f)
		if err != nil || !got.Equal(want) || got.Exponent() != want.Exponent() {
			t.Fatalf("decimalOf(%q, %q) = %s e%d, want %s e%d", i, f, got, got.Exponent(), want, want.Exponent())
		}
	}
}

func TestISODate(t *testing.T) {
	for _, y := range []int{1, 99, 999, 2026, 9999} {
		for m := 1; m <= 12; m++ {
			for d := 1; d <= 31; d++ {
				want := strconv.Itoa(y)
				want = strings.Repeat("0", 4-len(want)) + want + "-" + two(m) + "-" + two(d)
				if got := isoDate(y, m, d); got != want {
					t.Fatalf("isoDate(%d, %d, %d) = %q, want %q", y, m, d, got, want)
				}
			}
		}
	}
}

func two(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}
