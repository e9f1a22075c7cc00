package server

import (
	"bytes"
	"io"
)

// sentBody is a call's body as it goes to its provider: pieces sent one after another. They are
// the body as read on either side of what the gateway put in (the call's cap), not joined in a
// copy, which for a long prompt would cost as much as reading it.
type sentBody [][]byte

// size is the body's length in bytes.
func (b sentBody) size() int64 {
	var n int64
	for _, piece := range b {
		n += int64(len(piece))
	}
	return n
}

// reader reads the body from its start: each reader reads it anew, as a retry sends it again.
func (b sentBody) reader() io.Reader { return &piecesReader{body: b} }

// piecesReader reads a body's pieces one after another. It has no WriteTo, as io.MultiReader
// has, which net/http calls at the end of every body it sends and which takes a buffer of 32 KiB
// each time.
type piecesReader struct {
	body  sentBody
	piece int // the piece being read
	at    int // how much of it was read
}

func (r *piecesReader) Read(p []byte) (int, error) {
	for r.piece < len(r.body) && r.at == len(r.body[r.piece]) {
		r.piece, r.at = r.piece+1, 0
	}
	if r.piece == len(r.body) {
		return 0, io.EOF
	}
	n := copy(p, r.body[r.piece][r.at:])
	r.at += n
	return n, nil
}

// bytes is the body in one piece: a copy of its pieces joined, unless it is in one already.
func (b sentBody) bytes() []byte {
	if len(b) == 1 {
		return b[0]
	}
	return bytes.Join(b, nil)
}
