package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestConnLimitMakesRoomOfIdleConnections holds a server of two connections with two clients
// whose calls are in progress, and connects a third, which must wait: once the two calls end
// and their connections stay open, idle, the third is served.
func TestConnLimitMakesRoomOfIdleConnections(t *testing.T) {
	l, err := limitedListener("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := &http.Server{ConnState: l.track, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		io.WriteString(w, "ok")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	held := make(chan error, 2)
	for range 2 {
		conn := dial(t, l.Addr().String())
		go func() { held <- roundTrip(conn, "/hold") }()
	}
	third := dial(t, l.Addr().String())
	served := make(chan error, 1)
	go func() { served <- roundTrip(third, "/") }()
	select {
	case err := <-served:
		t.Fatalf("the third client was served (%v) while two calls held both connections", err)
	case <-time.After(200 * time.Millisecond): // it waits; nothing else can show it
	}
	close(release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("the third client: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third client was not served once the two connections went idle")
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// roundTrip sends a GET on conn, kept alive, and reads its answer.
func roundTrip(conn net.Conn, path string) error {
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: gateway\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
