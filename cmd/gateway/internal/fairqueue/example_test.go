package fairqueue_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
)

// The package's worked example: a provider's queue drains 5,000 tokens a second. Ann, of tenant
// acme, has 30 pages of 1,000 tokens queued; Bob, of tenant zeta, 2. The door promises each what
// its lane waits under fair sharing, not behind everyone.
func Example() {
	q := fairqueue.New(fairqueue.Options{})
	now := time.Unix(0, 0)
	const rate = 5000 // tokens a second
	page := func(tenant, user string) *fairqueue.Item {
		return &fairqueue.Item{Tenant: tenant, User: user, Weight: 1, Cost: 1000, Joins: now}
	}
	for range 30 {
		q.Push(page("acme", "ann"))
	}
	for range 2 {
		q.Push(page("zeta", "bob"))
	}
	// Carl, new to acme, takes turns with Ann: one of her pages goes before his.
	fmt.Println("carl:", q.EstimateWait(page("acme", "carl"), rate, now))
	// Dora, of a new tenant, takes turns with acme and zeta: a page of each goes before hers.
	fmt.Println("dora:", q.EstimateWait(page("kilo", "dora"), rate, now))
	// Ann's 31st page waits behind her 30 and zeta's two.
	fmt.Println("ann's 31st:", q.EstimateWait(page("acme", "ann"), rate, now))
	// Output:
	// carl: 800ms
	// dora: 600ms
	// ann's 31st: 6.6s
}
