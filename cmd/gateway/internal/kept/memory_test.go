package kept

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/poll"
)

func TestMemoryDropsExpiredOwnersAsItGrows(t *testing.T) {
	m := NewMemory()
	expiring := make([]string, minSweep)
	for i := range expiring {
		expiring[i] = fmt.Sprintf("resp_expiring_%d", i)
	}
	own(t, m, acme, time.Millisecond, expiring...)
	expires := m.owners[expiring[0]].expires
	poll.Until(t, 10*time.Second, "the owners to expire", func() bool { return time.Now().After(expires) })

	for i := range 2 * minSweep {
		own(t, m, acme, time.Hour, fmt.Sprintf("resp_live_%d", i))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range expiring {
		if _, ok := m.owners[id]; ok {
			t.Fatalf("%s is still held after %d more ids were owned; want every expired owner dropped", id, 2*minSweep)
		}
	}
	if len(m.owners) != 2*minSweep {
		t.Errorf("the store holds %d owners; want the %d not expired", len(m.owners), 2*minSweep)
	}
}

func TestMemoryOwnersDropsTheExpiredItReads(t *testing.T) {
	m := NewMemory()
	own(t, m, acme, time.Millisecond, "resp_a")
	poll.Until(t, 10*time.Second, "the owner to expire", func() bool { return owners(t, m, "resp_a")[0] == nil })
	if _, ok := m.owners["resp_a"]; ok {
		t.Error("an expired owner that Owners read is still held; want it dropped")
	}
}
