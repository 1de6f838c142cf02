package records

import (
	"math/rand/v2"
	"testing"
)

// Every key hash added twice is a candidate, and of 1,000,000 distinct keys
// only a few are (false candidates, which SQL then finds distinct).
func TestKeyFilterCandidates(t *testing.T) {
	var f keyFilter
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1_000_000
	var repeated []uint64
	for i := range n {
		h := rng.Uint64()
		f.add(h)
		if i%100_000 == 7 {
			repeated = append(repeated, h)
		}
	}
	for _, h := range repeated {
		f.add(h)
	}
	cands := map[int64]bool{}
	for _, c := range f.candidates() {
		cands[c] = true
	}
	for _, h := range repeated {
		if !cands[int64(h)] {
			t.Errorf("key hash %x was added twice but is not a candidate", h)
		}
	}
	if extra := len(cands) - len(repeated); extra > n/100 {
		t.Errorf("%d false candidates among %d distinct keys, want at most 1%%", extra, n)
	} else {
		t.Logf("%d false candidates among %d distinct keys", extra, n)
	}
	var empty keyFilter
	if c := empty.candidates(); c == nil || len(c) != 0 {
		t.Errorf("no key added: candidates %v, want empty and not nil", c)
	}
}
