// Package ids names things that must not share a name across gateways (calls' in-flight slots,
// requests) without a random read per name: a random prefix of the process's own, then a count.
package ids

import (
	"crypto/rand"
	"strconv"
	"strings"
	"sync/atomic"
)

// Sequence hands out names. The zero value is not usable; call New. It is safe for concurrent
// use.
type Sequence struct {
	prefix string
	n      atomic.Uint64
}

// New returns a sequence whose names start with prefix, then 80 random bits of its own.
func New(prefix string) *Sequence {
	return &Sequence{prefix: prefix + strings.ToLower(rand.Text()[:16]) + "-"}
}

// Next returns a name no other call of Next, in this process or another, returns.
func (s *Sequence) Next() string {
	return s.prefix + strconv.FormatUint(s.n.Add(1), 36)
}
