package ramp

import (
	"cmp"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
)

// providerErrorShare is the provider's 429s and 503s over the calls it received; 0 for none.
func providerErrorShare(calls []call) float64 {
	refused := 0
	for _, c := range calls {
		if c.refusedByProvider() {
			refused++
		}
	}
	return share(int64(refused), int64(len(calls)))
}

// backlog is when the gateways' queues held pages: from the first page that queued to the last
// dispatch of one; zero when none queued.
func backlog(pages []page) (from, to time.Duration) {
	from = -1
	for _, p := range pages {
		if p.door == (door{}) {
			continue
		}
		if from < 0 || p.door.queued < from {
			from = p.door.queued
		}
		to = max(to, p.door.dispatched)
	}
	if from < 0 {
		return 0, 0
	}
	return from, to
}

// backlogTokensShare is the tokens the provider admitted while the backlog lasted, over what its
// tokens per minute allow in that time; 0 without a backlog or a limit.
func backlogTokensShare(pages []page, calls []call, tokensPerMinute int64) float64 {
	from, to := backlog(pages)
	allowed := float64(tokensPerMinute) * (to - from).Minutes()
	if allowed <= 0 {
		return 0
	}
	var admitted int64
	for _, c := range calls {
		if c.admitted() && c.at >= from && c.at < to {
			admitted += c.tokens
		}
	}
	return float64(admitted) / allowed
}

// refusalsPerPage counts every refusal a page was answered, those it came back from included,
// over the pages.
func refusalsPerPage(pages []page) float64 {
	refusals := 0
	for _, p := range pages {
		refusals += p.busy
		if p.cause.refused() {
			refusals++
		}
	}
	return share(int64(refusals), int64(len(pages)))
}

// servedPerUser counts the pages served to each user who started a book, by user.
func servedPerUser(pages []page) map[int]int {
	served := map[int]int{}
	for _, p := range pages {
		served[p.user] += 0 // a user served nothing still counts
		if p.cause == Served {
			served[p.user]++
		}
	}
	return served
}

// jain is Jain's fairness index of xs: 1 when all are equal, 1/n when one has everything; 1 for
// none or all zero, which no one had more of than another.
func jain(xs []float64) float64 {
	var sum, squares float64
	for _, x := range xs {
		sum += x
		squares += x * x
	}
	if squares == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * squares)
}

// jainOverUsers is Jain's index over the pages served to each user who started a book.
func jainOverUsers(pages []page) float64 {
	var xs []float64
	for _, n := range servedPerUser(pages) {
		xs = append(xs, float64(n))
	}
	return jain(xs)
}

// wholeBookTimes are, for each book whose every page was served, the time from its first page
// sent to its last answered, sorted.
func wholeBookTimes(pages []page) []time.Duration {
	type span struct {
		from, to time.Duration
		broken   bool
	}
	books := map[int]*span{}
	for _, p := range pages {
		b := books[p.user]
		if b == nil {
			b = &span{from: p.sent}
			books[p.user] = b
		}
		b.from, b.to = min(b.from, p.sent), max(b.to, p.answered)
		b.broken = b.broken || p.cause != Served
	}
	var times []time.Duration
	for _, b := range books {
		if !b.broken {
			times = append(times, b.to-b.from)
		}
	}
	slices.Sort(times)
	return times
}

// estimateErrors are, for each page that queued with an estimate from the case's time from on,
// how far its wait was from it, as a share of the estimate, sorted.
func estimateErrors(pages []page, from time.Duration) []float64 {
	var errs []float64
	for _, p := range pages {
		if d := p.door; d.estimated > 0 && d.queued >= from {
			waited := d.dispatched - d.queued
			errs = append(errs, float64(max(waited-d.estimated, d.estimated-waited))/float64(d.estimated))
		}
	}
	slices.SortFunc(errs, cmp.Compare[float64])
	return errs
}

// providerBound is how long the provider needs for what it served in r: at its tokens a minute,
// for the tokens, prompt and completion; at its calls in flight, for the time its calls took,
// whichever is longer; 0 without a limit.
func providerBound(r caseRun) time.Duration {
	var bound time.Duration
	if r.tokensPerMinute > 0 {
		bound = time.Duration(float64(r.stats.PromptTokens+r.stats.CompletionTokens) / float64(r.tokensPerMinute) * float64(window))
	}
	if r.maxInFlight > 0 {
		var took time.Duration
		for _, c := range r.calls {
			if c.status == 200 {
				took += c.took
			}
		}
		bound = max(bound, took/time.Duration(r.maxInFlight))
	}
	return bound
}

// minuteShares are the tokens the provider admitted in each minute of a case that ran for
// elapsed, by the calls' arrivals, over what its tokens a minute allow in that minute: the last,
// cut short by the case's end, over its own length. Nil without a limit.
func minuteShares(calls []call, elapsed time.Duration, tokensPerMinute int64) []float64 {
	n := int((elapsed + window - 1) / window)
	if n == 0 || tokensPerMinute <= 0 {
		return nil
	}
	tokens := make([]int64, n)
	for _, c := range calls {
		if c.admitted() {
			tokens[min(max(int(c.at/window), 0), n-1)] += c.tokens
		}
	}
	shares := make([]float64, n)
	for k, t := range tokens {
		length := min(elapsed-time.Duration(k)*window, window)
		shares[k] = float64(t) / (float64(tokensPerMinute) * length.Minutes())
	}
	return shares
}

// figures fills in cr the measures of fairness and of the door from what the case recorded.
func figures(cr *CaseReport, r caseRun) {
	cr.ProviderErrorShare = providerErrorShare(r.calls)
	cr.BacklogTokensShare = backlogTokensShare(r.pages, r.calls, r.tokensPerMinute)
	cr.RefusalsPerPage = refusalsPerPage(r.pages)
	cr.JainOverUsers = jainOverUsers(r.pages)
	whole := wholeBookTimes(r.pages)
	cr.WholeBookP50Seconds = labrun.Percentile(whole, 50).Seconds()
	cr.WholeBookP95Seconds = labrun.Percentile(whole, 95).Seconds()
	cr.EstimateErrorP90 = labrun.Percentile(estimateErrors(r.pages, 0), 90)
	cr.EstimateErrorP90AfterArrivals = labrun.Percentile(estimateErrors(r.pages, r.schedule.lastStep()), 90)
	cr.DoorWaits = doorWaits(r.pages)
	boundFigures(cr, r)
	if cr.UnfinishedBooks > 0 { // a case stopped at its cap measures the cap, not the crowd
		cr.JainOverUsers, cr.EstimateErrorP90, cr.EstimateErrorP90AfterArrivals, cr.TookOverBound = 0, 0, 0, 0
	}
}

// boundFigures fills in cr how long the crowd took against the provider's own bound, and what
// the provider admitted minute by minute.
func boundFigures(cr *CaseReport, r caseRun) {
	bound := providerBound(r)
	cr.ProviderBoundSeconds, cr.RampSeconds = bound.Seconds(), r.schedule.lastStep().Seconds()
	if bound > 0 {
		cr.TookOverBound = r.elapsed.Seconds() / bound.Seconds()
	}
	cr.ProviderMinuteShares = minuteShares(r.calls, r.elapsed, r.tokensPerMinute)
}

// doorWaits are the pages that queued with an estimate, in the order they queued.
func doorWaits(pages []page) []DoorWait {
	var out []DoorWait
	for _, p := range pages {
		if d := p.door; d.estimated > 0 {
			out = append(out, DoorWait{User: p.user, Page: p.index, CameBack: p.busy, QueuedSeconds: d.queued.Seconds(),
				WaitedSeconds: (d.dispatched - d.queued).Seconds(), EstimatedSeconds: d.estimated.Seconds()})
		}
	}
	slices.SortFunc(out, func(a, b DoorWait) int { return cmp.Compare(a.QueuedSeconds, b.QueuedSeconds) })
	return out
}

// Mixed is what the interactive case found: the interactive tenant's
// latency beside the provider's own, and what each tenant was served.
type Mixed struct {
	// InteractiveP95Seconds is the p95 of the interactive tenant's calls
	// served, from submit to answer; ProviderP95Seconds the p95 of the
	// provider's own time to answer the calls it served.
	InteractiveP95Seconds float64 `json:"interactiveP95Seconds"`
	ProviderP95Seconds    float64 `json:"providerP95Seconds"`
	// Sent and Served count each tenant's calls, interactive then batch.
	Sent   [2]int `json:"sent"`
	Served [2]int `json:"served"`
}

// mixedOf is what the interactive case found: user 0 is the interactive
// tenant, user 1 the batch one.
func mixedOf(r caseRun) *Mixed {
	m := &Mixed{}
	var interactive, provider []time.Duration
	for _, p := range r.pages {
		m.Sent[p.user]++
		if p.cause == Served {
			m.Served[p.user]++
			if p.user == 0 {
				interactive = append(interactive, p.answered-p.sent)
			}
		}
	}
	for _, c := range r.calls {
		if c.status == 200 {
			provider = append(provider, c.took)
		}
	}
	slices.Sort(interactive)
	slices.Sort(provider)
	m.InteractiveP95Seconds = labrun.Percentile(interactive, 95).Seconds()
	m.ProviderP95Seconds = labrun.Percentile(provider, 95).Seconds()
	return m
}
