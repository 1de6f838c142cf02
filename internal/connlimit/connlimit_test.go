package connlimit

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// Past either cap a connection is closed at once; a closed connection
// frees its slot, once.
func TestListenerCaps(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(inner, Limits{Max: 3, PerAddr: 2})
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(local string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// refused: the server end reset the connection at once (the dial, or
	// a read, ends with an error that is not the test's own deadline).
	refused := func(local string) bool {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if errors.Is(err, syscall.ECONNRESET) {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		ne, timeout := err.(net.Error)
		return err != nil && !(timeout && ne.Timeout())
	}
	dial("127.0.0.1")
	dial("127.0.0.1")
	first, second := <-accepted, <-accepted
	if !refused("127.0.0.1") {
		t.Fatal("a third connection from one address was kept (PerAddr 2)")
	}
	dial("127.0.0.2")
	<-accepted
	if !refused("127.0.0.3") {
		t.Fatal("a fourth connection in all was kept (Max 3)")
	}
	if ln.Refused() != 2 || ln.Open() != 3 {
		t.Fatalf("refused %d, open %d; want 2 and 3", ln.Refused(), ln.Open())
	}
	// One of 127.0.0.1's closes (twice: counted once); its slot is free.
	first.Close()
	first.Close()
	if ln.Open() != 2 {
		t.Fatalf("open %d after a close; want 2", ln.Open())
	}
	dial("127.0.0.1")
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the freed slot was not given to a new connection")
	}
	second.Close()
}
