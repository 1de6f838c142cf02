package jsondup

import (
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	for body, want := range map[string]string{
		`{"amount":"1.00","amount":"9999.00"}`:                     "amount",
		`{"a":1,"b":{"c":1,"c":2}}`:                                "b.c",
		`{"rows":[{"row":1},{"row":2,"amount":"1","amount":"2"}]}`: "rows[1].amount",
		`{"am\u006funt":"1","amount":"2"}`:                         "amount", // the same name, escaped
		`{"a":1,"b":2}`:                                            "",
		`[{"a":1},{"a":1}]`:                                        "", // one name per object
		`not json`:                                                 "",
		`{"a":1,"a":`:                                              "a", // repeated before it broke off
		`{"x":{"a":1},"y":{"a":1}}`:                                "",
	} {
		got, found := Find([]byte(body))
		if got != want || found != (want != "") {
			t.Errorf("Find(%s) = %q, %v; want %q", body, got, found, want)
		}
	}
	// Linear: 100,000 distinct members and one repeat at the end.
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 100000; i++ {
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa(i) + `":1,`)
	}
	b.WriteString(`"k0":2,"k0":3}`)
	if got, found := Find([]byte(b.String())); !found || got != "k0" {
		t.Errorf("large object: %q %v", got, found)
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}
