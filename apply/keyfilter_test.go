package apply

import (
	"math/rand/v2"
	"testing"
)

// Every key hash added twice is a candidate. Up to keyExactMax keys no
// other is; past it (a Bloom filter) only a few are (false candidates,
// which SQL then finds distinct).
func TestKeyFilterCandidates(t *testing.T) {
	for name, tc := range map[string]struct {
		n           int
		falseAtMost int
	}{
		"1,000,000 keys, exact":       {n: 1_000_000, falseAtMost: 0},
		"keyExactMax + 1 keys, Bloom": {n: keyExactMax + 1, falseAtMost: (keyExactMax + 1) / 50},
	} {
		t.Run(name, func(t *testing.T) {
			var f keyFilter
			rng := rand.New(rand.NewPCG(1, 2))
			var repeated []uint64
			for i := range tc.n {
				h := rng.Uint64()
				f.add(h)
				if i%100_000 == 7 {
					repeated = append(repeated, h)
				}
			}
			for _, h := range repeated {
				f.add(h)
			}
			if exact := tc.falseAtMost == 0; exact != (f.bits == nil) {
				t.Errorf("after %d keys the filter is exact: %v, want %v", tc.n+len(repeated), f.bits == nil, exact)
			}
			cands := map[int64]bool{}
			for _, c := range f.candidates() {
				if cands[c] {
					t.Errorf("candidate %x given twice", c)
				}
				cands[c] = true
			}
			for _, h := range repeated {
				if !cands[int64(h)] {
					t.Errorf("key hash %x was added twice but is not a candidate", h)
				}
			}
			if extra := len(cands) - len(repeated); extra > tc.falseAtMost {
				t.Errorf("%d false candidates among %d distinct keys, want at most %d", extra, tc.n, tc.falseAtMost)
			} else {
				t.Logf("%d false candidates among %d distinct keys", extra, tc.n)
			}
		})
	}
	var empty keyFilter
	if c := empty.candidates(); c == nil || len(c) != 0 {
		t.Errorf("no key added: candidates %v, want empty and not nil", c)
	}
	var thrice keyFilter
	for range 3 {
		thrice.add(42)
	}
	if c := thrice.candidates(); len(c) != 1 || c[0] != 42 {
		t.Errorf("a key added three times: candidates %v, want [42]", c)
	}
}
