package apply

import (
	"io"
	"slices"
	"strconv"
	"testing"
)

// empRefs keeps each reference once, in the order first seen, whether its
// rows come together or not; past empRefsMax references it gives up (nil),
// so onboarding groups the staged rows instead.
func TestEmpRefsDistinct(t *testing.T) {
	var e empRefs
	for _, r := range []string{"E1", "E1", "E1", "E2", "E1", "E3", "E2", "E2", "e1", "E\t4", "E3"} {
		e.add(r)
	}
	if want := []string{"E1", "E2", "E3", "e1", "E\t4"}; !slices.Equal(e.list, want) {
		t.Errorf("references %q, want %q", e.list, want)
	}
	got, err := io.ReadAll(&refsReader{refs: e.list})
	if err != nil {
		t.Fatal(err)
	}
	if want := "E1\nE2\nE3\ne1\nE\\t4\n"; string(got) != want {
		t.Errorf("COPY text %q, want %q", got, want)
	}

	var big empRefs
	for i := range empRefsMax {
		big.add("E" + strconv.Itoa(i))
		big.add("E" + strconv.Itoa(i/2))
	}
	if len(big.list) != empRefsMax {
		t.Fatalf("%d references of %d distinct ones kept", len(big.list), empRefsMax)
	}
	big.add("E0") // seen: still within the bound
	if big.list == nil {
		t.Fatal("a reference already kept dropped the list")
	}
	big.add("NEW")
	big.add("E1")
	if big.list != nil || big.seen != nil {
		t.Errorf("past %d references the list is kept (%d), want it dropped", empRefsMax, len(big.list))
	}
}

// A reader of many references gives every byte whatever the size of the
// reads asked.
func TestRefsReaderSmallReads(t *testing.T) {
	var e empRefs
	var want []byte
	for i := range 10_000 {
		r := "E" + strconv.Itoa(i)
		e.add(r)
		want = append(append(want, r...), '\n')
	}
	rd := &refsReader{refs: e.list}
	var got []byte
	buf := make([]byte, 7)
	for {
		n, err := rd.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != string(want) {
		t.Errorf("read %d bytes, want %d", len(got), len(want))
	}
}
