package dispatch

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Vendor is a small payroll vendor's batch API, the one `serve --demo`
// serves so a newcomer can watch a period dispatched: it pays each line key
// once (a key delivered again is acknowledged, not paid again), answers 409
// to a chunk whose lines are all paid already, and now and then answers 429
// (every Every429th request, Retry-After: 1, nothing paid) or 207 (every
// Every207th: the chunk's last line "busy", 503, the others paid). It keeps
// everything in memory.
type Vendor struct {
	Every207, Every429 int

	mu       sync.Mutex
	requests int
	paid     map[string]int // line key → deliveries (paid on the first)
}

// Paid returns, for every line key delivered, how often it was delivered
// (it was paid once, on the first delivery).
func (v *Vendor) Paid() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := make(map[string]int, len(v.paid))
	for k, n := range v.paid {
		m[k] = n
	}
	return m
}

func (v *Vendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var batch struct {
		Lines []struct {
			Key string `json:"key"`
		} `json:"lines"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil || json.Unmarshal(body, &batch) != nil || r.Header.Get("Idempotency-Key") == "" {
		http.Error(w, `{"error":"a JSON batch with an Idempotency-Key header is expected"}`, http.StatusBadRequest)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.paid == nil {
		v.paid = map[string]int{}
	}
	v.requests++
	if v.Every429 > 0 && v.requests%v.Every429 == 0 {
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error":"slow down"}`, http.StatusTooManyRequests)
		return
	}
	type result struct {
		Key    string `json:"key"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	results := make([]result, 0, len(batch.Lines))
	partial := v.Every207 > 0 && v.requests%v.Every207 == 0 && len(batch.Lines) > 1
	fresh := 0
	for i, l := range batch.Lines {
		if partial && i == len(batch.Lines)-1 {
			results = append(results, result{l.Key, http.StatusServiceUnavailable, "busy: send it again"})
			continue
		}
		if v.paid[l.Key] == 0 {
			fresh++
		}
		v.paid[l.Key]++
		results = append(results, result{l.Key, http.StatusOK, "paid"})
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case partial:
		w.WriteHeader(http.StatusMultiStatus)
	case fresh == 0:
		w.WriteHeader(http.StatusConflict)
	default:
		w.WriteHeader(http.StatusOK)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
}
