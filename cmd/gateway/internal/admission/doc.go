// Package admission owns a call's way through the gateway's limits, from "this caller wants
// this, at this estimated cost" to "done".
//
// Gate.Admit checks every limit that applies to a Request (user, tenant, endpoint, global,
// provider) and takes the estimate from all of them or from none. A call that may not go yet
// and whose limit queues waits in its provider's fair queue, behind a door that turns it away
// at once when its lane would wait longer than its plan's maxWait, or, behind its caller's own
// calls while users join the queue, than the wait the door can still promise (see
// fairqueue.Queue.Growth). Admit answers with a Ticket
// (the call may go now) or a Refusal (a value that says which limit refused, when to come back,
// the place in the lane and the wait estimated).
//
// A Ticket ends exactly once: in Settle, when the provider served the call and its real usage
// is charged in place of the estimate, or in Refund, when it did not and everything is given
// back. Whatever else happens to a call (its client leaves, its stream is cut, it is a job's
// attempt delivered twice), the caller ends its ticket with one of the two, and a second end
// does nothing.
//
// The Gate also keeps what the provider's answers teach (a throttle pauses its queue and halves
// this replica's share of its in-flight cap; rate-limit headers that report limits lower than
// configured are learned, for the caller to compile into the provider's limits), counts the
// calls in flight, and keeps this
// replica's usage for the snapshot the operator reads. It speaks in values: the HTTP side turns
// tickets and refusals into answers and headers.
package admission
