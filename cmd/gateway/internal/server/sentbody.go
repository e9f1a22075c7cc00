package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
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

// request is a POST of the body, whose URL and headers are still to set. net/http knows the
// length of a body in one piece, read by a bytes.Reader, and reads it again for a retry itself;
// a body in pieces is given its length, and read again from its start for a retry.
func (b sentBody) request(ctx context.Context) (*http.Request, error) {
	if len(b) == 1 {
		return http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(b[0]))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", b.reader())
	if err != nil {
		return nil, err
	}
	req.ContentLength = b.size()
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(b.reader()), nil }
	return req, nil
}

// reader reads the pieces from the start of the first: each reader reads them anew.
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
