package ratelimit

// On Redis Cluster a script run may touch the keys of one slot only, while a decision spans
// several: a tenant's limits, the global ones and a provider's each carry their own hash tag. A
// run over several hash tags is therefore sent as one part per hash tag, every part in the same
// round trip (the cluster client sends each node its own), and its answer is joined from theirs:
//
//   - A decision is allowed when every part allowed. When a part refused or failed, the parts
//     that took are undone before the caller hears, so a refusal leaves every level as it was.
//     Each part checks and takes atomically on its own slot, so no level ever holds more than
//     its capacity; for the moment of one round trip a refused decision holds what it took on
//     the other slots, and a concurrent decision may be refused for it (on the safe side).
//   - A settlement keeps a record of its id in each part's slot, so each part applies once
//     however often the settlement is sent, and a part that failed can be sent again alone.
//   - A renewal renews the leases of each part.
//
// The reply of a run sent in parts has the shape of a whole run's, so callers cannot tell.

// split returns the runs of batch as they are sent: each whole on one primary; when sharded, a
// run whose keys carry several hash tags as its parts.
func (p *pipeline) split(batch []*scriptRun) []*scriptRun {
	if !p.sharded {
		return batch
	}
	var sent []*scriptRun
	for i, r := range batch {
		r.parts = splitByHashTag(r)
		if r.parts != nil && sent == nil {
			sent = append(make([]*scriptRun, 0, len(batch)+len(r.parts)), batch[:i]...)
		}
		switch {
		case r.parts != nil:
			sent = append(sent, r.parts...)
		case sent != nil:
			sent = append(sent, r)
		}
	}
	if sent == nil {
		return batch
	}
	return sent
}

// splitByHashTag returns r's parts, one per hash tag of its keys in the order they first come,
// or nil when every key carries the same one.
func splitByHashTag(r *scriptRun) []*scriptRun {
	first, same := hashTag(r.keys[0]), 1
	for same < len(r.keys) && hashTag(r.keys[same]) == first {
		same++
	}
	if same == len(r.keys) {
		return nil
	}
	var parts []*scriptRun
	byTag := map[string]*scriptRun{}
	for i, key := range r.keys {
		tag := hashTag(key)
		part := byTag[tag]
		if part == nil {
			part = &scriptRun{clock: r.clock, mode: r.mode, id: r.id, keep: r.keep}
			if r.id != "" {
				part.mark = settledKey(key, r.id)
			}
			byTag[tag] = part
			parts = append(parts, part)
		}
		part.keys = append(part.keys, key)
		part.args = append(part.args, r.args[5*i:5*i+5]...)
		part.checks = append(part.checks, i)
	}
	return parts
}

// join sets the answer of r, sent in parts, from theirs: the first part's error if any failed,
// else for a decision the reply of a whole run.
func (r *scriptRun) join() {
	r.reply, r.err = nil, nil
	for _, part := range r.parts {
		if part.err != nil {
			r.err = part.err
			return
		}
	}
	if r.mode == "decide" {
		r.reply = joinDecisions(r)
	}
}

// joinDecisions returns decision r's reply from its parts': allowed when each part allowed, the
// first check that refused, the longest wait, and each check's remaining and reset. A refused
// decision takes nothing, so a check that took in a part that allowed reports what it had before.
func joinDecisions(r *scriptRun) []int64 {
	reply := make([]int64, r.replyLen())
	reply[0], reply[1] = 1, -1
	for _, part := range r.parts {
		pr := part.reply
		if pr[0] == 0 {
			if refused := int64(part.checks[pr[1]]); reply[0] == 1 || refused < reply[1] {
				reply[1] = refused
			}
			reply[0] = 0
		}
		reply[2], reply[3], reply[replyNow] = max(reply[2], pr[2]), max(reply[3], pr[3]), pr[replyNow]
		for j, i := range part.checks {
			reply[remainingAt(i)], reply[remainingAt(i)+1] = pr[remainingAt(j)], pr[remainingAt(j)+1]
		}
	}
	if reply[0] == 0 {
		for _, part := range r.parts {
			if part.reply[0] == 1 {
				for j, i := range part.checks {
					reply[remainingAt(i)] += part.args[5*j+4].(int64)
				}
			}
		}
	}
	return reply
}
