package server

import (
	"bytes"
	"io"
)

// sentBody is a call's body as it goes to its provider: pieces sent one after another. A long
// body's are the body as read on either side of what the gateway put in (the call's cap), not
// joined in a copy, which would cost as much as reading it (see piecesOf).
type sentBody [][]byte

// joinedBelow is the length under which a body's pieces are joined in one: net/http writes the
// headers of a body it does not know to be in memory, one in pieces, apart from it, and an
// extra write costs more than the copy of a short body.
const joinedBelow = 64 << 10

// piecesOf is the body that pieces make, in one piece when it is shorter than joinedBelow.
func piecesOf(pieces [][]byte) sentBody {
	b := sentBody(pieces)
	if len(b) > 1 && b.size() < joinedBelow {
		return sentBody{bytes.Join(b, nil)}
	}
	return b
}

// size is the body's length in bytes.
func (b sentBody) size() int64 {
	var n int64
	for _, piece := range b {
		n += int64(len(piece))
	}
	return n
}

// reader reads the body from its start: each reader reads it anew, as a retry sends it again.
// A body in one piece is read as net/http knows a body in memory to be, by a bytes.Reader.
func (b sentBody) reader() io.Reader {
	if len(b) == 1 {
		return bytes.NewReader(b[0])
	}
	return &piecesReader{body: b}
}

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
