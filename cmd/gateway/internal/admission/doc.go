// Package admission owns a call's way through the gateway's limits, from "this caller wants
// this, at this estimated cost" to "done".
//
// Gate.Admit checks every limit that applies to a Request (user, tenant, endpoint, global,
// provider) and takes the estimate from all of them or from none. It answers with a Ticket (the
// call may go now) or a Refusal (a value that says which limit refused, when to come back, the
// place in the lane and the wait estimated).
//
// A call that may not go yet and whose limit queues comes to its provider's door (door.go): one
// decision, a pure function of one value that holds all it reads (the call, what its limits hold,
// the queue's drain, what the queue says of its lane), lets it into the fair queue with the wait
// it is promised, or answers it busy with when to come back. Its estimates are the fair queue's
// model (see package fairqueue) at the rate the queue drains (drain.go). The provider's
// dispatcher (dispatcher.go) owns the queue and its waiters and sends its calls in fair order as
// the limits allow; the provider's health (health.go: its breaker, its throttles' pauses, the
// limits its answers teach) is kept apart, under a lock of its own; the gateways sharing a
// provider exchange what each lane was served (shares.go).
//
// A Ticket ends exactly once: in Settle, when the provider served the call and its real usage
// is charged in place of the estimate, or in Refund, when it did not and everything is given
// back. Whatever else happens to a call (its client leaves, its stream is cut, it is a job's
// attempt delivered twice), the caller ends its ticket with one of the two, and a second end
// does nothing.
//
// The Gate also keeps what the provider's answers teach (feedback.go: a throttle pauses its queue
// and halves this replica's share of its in-flight cap; rate-limit headers that report limits
// lower than configured are learned, for the caller to compile into the provider's limits),
// counts the calls in flight, and keeps this replica's usage for the snapshot the operator reads. It speaks in values: the HTTP side turns
// tickets and refusals into answers and headers.
package admission
