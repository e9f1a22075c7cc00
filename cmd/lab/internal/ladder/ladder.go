// Package ladder is a list of counts that only go up, such as the ramp's users or the overhead
// run's request rates, written on a command line as "1,2,3,5".
package ladder

import (
	"fmt"
	"strconv"
	"strings"
)

// Ladder is a list of counts. As a flag.Value it reads and writes the comma-separated form.
type Ladder []int

// String is the comma-separated form.
func (l *Ladder) String() string {
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// Set replaces the list with the comma-separated counts in s.
func (l *Ladder) Set(s string) error {
	var counts Ladder
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("ladder: %q is not a whole number", f)
		}
		counts = append(counts, n)
	}
	*l = counts
	return nil
}

// Increasing reports whether the list is not empty, starts above zero and every count is above
// the one before.
func (l Ladder) Increasing() bool {
	if len(l) == 0 || l[0] <= 0 {
		return false
	}
	for i := 1; i < len(l); i++ {
		if l[i] <= l[i-1] {
			return false
		}
	}
	return true
}
