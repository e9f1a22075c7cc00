package ramp

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

// Report is what a ramp found: its settings and a result for each case, in
// the order they ran.
type Report struct {
	Settings Settings     `json:"settings"`
	Cases    []CaseReport `json:"cases"`
}

// Settings are the ramp's parameters (see Options), kept with its results:
// times in seconds, prices in dollars per million tokens.
type Settings struct {
	Users                 []int           `json:"users"`
	StepSeconds           float64         `json:"stepSeconds"`
	PagesPerBook          int             `json:"pagesPerBook"`
	PromptTokens          int64           `json:"promptTokens"`
	MaxTokens             int64           `json:"maxTokens"`
	DurationSeconds       float64         `json:"durationSeconds"`
	QueueCapSeconds       float64         `json:"queueCapSeconds"`
	RequestsPerMinute     int64           `json:"requestsPerMinute"`
	TokensPerMinute       int64           `json:"tokensPerMinute"`
	MaxInFlight           int64           `json:"maxInFlight"`
	LatencySeconds        float64         `json:"latencySeconds"`
	LatencyStdDevSeconds  float64         `json:"latencyStdDevSeconds"`
	SizeSpread            float64         `json:"sizeSpread"`
	Text                  string          `json:"text"`
	LongPromptTokens      int64           `json:"longPromptTokens,omitempty"`
	LongMaxTokens         int64           `json:"longMaxTokens,omitempty"`
	LongUsers             float64         `json:"longUsers,omitempty"`
	HugePages             int             `json:"hugePages,omitempty"`
	HugePromptTokens      int64           `json:"hugePromptTokens,omitempty"`
	SpreadPages           bool            `json:"spreadPages"`
	InputPricePerMillion  gatewayv1.Money `json:"inputPricePerMillion"`
	OutputPricePerMillion gatewayv1.Money `json:"outputPricePerMillion"`
	PoolConns             int             `json:"poolConns"`
	UserBurst             int64           `json:"userBurst"`
	UserRequestsPerSecond int64           `json:"userRequestsPerSecond"`
	QueueMaxWaitSeconds   float64         `json:"queueMaxWaitSeconds"`
	Gateways              int             `json:"gateways"`
	Comebacks             int             `json:"comebacks"`
}

// CaseReport is what one case found.
type CaseReport struct {
	// Case is the case's name.
	Case string `json:"case"`
	// ElapsedSeconds is how long the case ran.
	ElapsedSeconds float64 `json:"elapsedSeconds"`
	// Books counts the books started, one per user; CleanBooks those whose
	// every page was served.
	Books      int `json:"books"`
	CleanBooks int `json:"cleanBooks"`
	// UnfinishedBooks counts the books that nothing broke but that were not
	// done when the case ended.
	UnfinishedBooks int `json:"unfinishedBooks"`
	// BrokenBooks counts the books a page of which failed.
	BrokenBooks int `json:"brokenBooks"`
	// Pages counts the pages of the books started, and Outcomes them by
	// cause.
	Pages    int           `json:"pages"`
	Outcomes map[Cause]int `json:"outcomes"`
	// DiedAtProvider counts the pages the provider refused (429 or 503).
	DiedAtProvider int `json:"diedAtProvider"`
	// Refused counts the pages the gateway refused (its 429, or busy).
	Refused int `json:"refused"`
	// BusyAnswers counts the door's busy answers that pages waited out and
	// came back from.
	BusyAnswers int `json:"busyAnswers"`
	// FirstFailure is the first page that failed; nil if none did.
	FirstFailure *Failure `json:"firstFailure,omitempty"`
	// Billed is what the provider billed; BilledForBrokenBooks the part of
	// it for pages of books that did not come out clean.
	Billed               gatewayv1.Money `json:"billed"`
	BilledForBrokenBooks gatewayv1.Money `json:"billedForBrokenBooks"`
	// WaitP50Seconds and WaitP95Seconds are percentiles of the pages
	// served, from submit to answer.
	WaitP50Seconds float64 `json:"waitP50Seconds"`
	WaitP95Seconds float64 `json:"waitP95Seconds"`
	// PeakTokensPerMinute is the most tokens the provider admitted in a
	// rolling minute; PeakTokensShare is that over its limit.
	PeakTokensPerMinute int64   `json:"peakTokensPerMinute"`
	PeakTokensShare     float64 `json:"peakTokensShare"`
	// ProviderErrorShare is the provider's 429s and 503s over the calls it received.
	ProviderErrorShare float64 `json:"providerErrorShare"`
	// BacklogTokensShare is the tokens the provider admitted while a gateway's queue held pages,
	// over what its tokens per minute allow in that time; 0 when nothing queued.
	BacklogTokensShare float64 `json:"backlogTokensShare"`
	// RefusalsPerPage counts the gateway's refusals, the busy answers a page came back from
	// included, over the pages.
	RefusalsPerPage float64 `json:"refusalsPerPage"`
	// JainOverUsers is Jain's fairness index over the pages served to each user who started a
	// book: 1 when each had as many. Zero, not measured, when the case stopped at its cap with
	// books unfinished, as are the estimate errors: users who came last had the least time.
	JainOverUsers float64 `json:"jainOverUsers"`
	// WholeBookP50Seconds and WholeBookP95Seconds are percentiles of the time from a clean
	// book's first page sent to its last answered.
	WholeBookP50Seconds float64 `json:"wholeBookP50Seconds"`
	WholeBookP95Seconds float64 `json:"wholeBookP95Seconds"`
	// EstimateErrorP90 is the 90th percentile, over the pages that queued with an estimate, of
	// how far a page's wait in the queue was from the door's estimate, as a share of it.
	EstimateErrorP90 float64 `json:"estimateErrorP90"`
	// EstimateErrorP90AfterArrivals is the same over the pages that queued once the ramp's last
	// users had arrived. A page queued before may see users who arrive after it take turns ahead
	// of its lane's later pages, as fair queuing lets a newcomer, and no estimate at the door
	// knows who is still to come.
	EstimateErrorP90AfterArrivals float64 `json:"estimateErrorP90AfterArrivals"`
	// ProviderBoundSeconds is the provider's own bound, how long it needs at its full pace for what
	// it served: the tokens, prompt and completion, over its tokens a minute, or the time its calls
	// took over its calls allowed at once, whichever is longer.
	ProviderBoundSeconds float64 `json:"providerBoundSeconds"`
	// RampSeconds is the ramp's own length: when its last users arrived.
	RampSeconds float64 `json:"rampSeconds"`
	// TookOverBound is ElapsedSeconds over ProviderBoundSeconds: 1 when the crowd took no longer
	// than the provider needs. Zero, not measured, without a bound or when the case stopped at its
	// cap.
	TookOverBound float64 `json:"tookOverBound"`
	// ProviderMinuteShares are the tokens the provider admitted in each minute from the case's
	// start, by their calls' arrivals, over its tokens a minute; the last minute, cut short by the
	// case's end, over its own length.
	ProviderMinuteShares []float64 `json:"providerMinuteShares,omitempty"`
	// DoorWaits are the pages that queued with an estimate, in the order they queued: what the
	// estimate error is reckoned from, for a reader who wants to see where it lies.
	DoorWaits []DoorWait `json:"doorWaits,omitempty"`
	// Mixed is what the interactive case found; nil for a case of books.
	Mixed *Mixed `json:"mixed,omitempty"`
	// Provider is the provider's own counts at the end of the case.
	Provider provider.Stats `json:"provider"`
	// Series is the case over time, for the charts.
	Series Series `json:"series"`
	// Notes say what a reader must know to read the numbers right.
	Notes []string `json:"notes,omitempty"`
	// Pool is what the failover case's pool did; nil for another case.
	Pool *PoolReport `json:"pool,omitempty"`
}

// DoorWait is one page's wait in a gateway's queue against the door's estimate.
type DoorWait struct {
	User int `json:"user"`
	Page int `json:"page"`
	// CameBack is how many busy answers the page waited out before this wait.
	CameBack int `json:"cameBack"`
	// QueuedSeconds is when it queued, from the case's start.
	QueuedSeconds    float64 `json:"queuedSeconds"`
	WaitedSeconds    float64 `json:"waitedSeconds"`
	EstimatedSeconds float64 `json:"estimatedSeconds"`
}

// Failure is the first page that failed.
type Failure struct {
	// Users is how many users the ramp had started when it failed.
	Users int `json:"users"`
	// AtSeconds is when it was answered, from the case's start.
	AtSeconds float64 `json:"atSeconds"`
	Cause     Cause   `json:"cause"`
}

// page is what happened to one page, as its client saw it.
type page struct {
	user, index int
	// sent and answered are from the case's start; answered is when the
	// client gave up for a page without an answer.
	sent, answered time.Duration
	cause          Cause
	// busy counts the door's busy answers that the page waited out, and
	// retried the provider's refusals it waited out and was sent again after.
	busy, retried int
	// usage of a served page.
	promptTokens, completionTokens int64
	// door is what the gateway said of the served attempt's wait in its queue.
	door door
}

// door is a served attempt's wait in a gateway's queue, from the case's start; zero for an
// attempt that did not queue.
type door struct {
	queued, dispatched time.Duration
	// estimated is the wait the door estimated when it let the attempt in; 0 if it gave none.
	estimated time.Duration
}

// call is one call as the provider saw it.
type call struct {
	at   time.Duration // arrival, from the case's start
	took time.Duration // until the provider had answered
	// status answered; 0 when the client left before the answer.
	status int
	tokens int64 // prompt and expected completion, as the provider counts them
}

// admitted reports whether the provider let the call in, so that its
// tokens count in the minute.
func (c call) admitted() bool { return c.status == 200 || c.status == 0 }

// refusedByProvider reports whether the provider refused the call.
func (c call) refusedByProvider() bool { return c.status == 429 || c.status == 503 }

// caseRun is everything one case recorded: the input of summarize.
type caseRun struct {
	name string
	// queued says the case asked the gateway to queue its books; steady
	// that it sent steady rates of two tenants instead of books.
	queued, steady bool
	// limit is the longest the case could run, which the flag capFlag sets.
	limit   time.Duration
	capFlag string
	// comebacks is the most times a page was sent again.
	comebacks int
	schedule  schedule
	elapsed   time.Duration
	pages     []page // every page of every book started
	calls     []call
	stats     provider.Stats
	// tokensPerMinute and maxInFlight are the provider's limits; zero for none.
	tokensPerMinute, maxInFlight int64
	prices                       gatewayv1.Prices
}

// summarize turns what a case recorded into its report.
func summarize(r caseRun) CaseReport {
	books, clean, unfinished, wasted := booksOf(r.pages, r.prices)
	waits := servedWaits(r.pages)
	peak := peakPerMinute(r.calls)
	cr := CaseReport{
		Case:                 r.name,
		ElapsedSeconds:       r.elapsed.Seconds(),
		Books:                books,
		CleanBooks:           clean,
		UnfinishedBooks:      unfinished,
		BrokenBooks:          books - clean - unfinished,
		Pages:                len(r.pages),
		Outcomes:             outcomes(r.pages),
		FirstFailure:         firstFailure(r.pages, r.schedule),
		Billed:               gatewayv1.MoneyFromMicro(r.stats.MicroDollars),
		BilledForBrokenBooks: gatewayv1.MoneyFromMicro(wasted),
		WaitP50Seconds:       labrun.Percentile(waits, 50).Seconds(),
		WaitP95Seconds:       labrun.Percentile(waits, 95).Seconds(),
		PeakTokensPerMinute:  peak,
		PeakTokensShare:      share(peak, r.tokensPerMinute),
		Provider:             r.stats,
		Series:               seriesOf(r),
	}
	for c, n := range cr.Outcomes {
		if c.diedAtProvider() {
			cr.DiedAtProvider += n
		}
		if c.refused() {
			cr.Refused += n
		}
	}
	for _, p := range r.pages {
		cr.BusyAnswers += p.busy
	}
	figures(&cr, r)
	if r.steady {
		cr.Mixed = mixedOf(r)
	}
	cr.Notes = notes(r, cr.Outcomes)
	return cr
}

func outcomes(pages []page) map[Cause]int {
	out := map[Cause]int{}
	for _, p := range pages {
		out[p.cause]++
	}
	return out
}

// booksOf counts the books (one per user), the clean ones, and what the
// pages served of the broken ones cost, in micro-dollars, at the provider's
// prices and with its rounding: up, per call.
//
// A book is broken when a page failed, unfinished when none failed but some
// had no answer yet when the case ended, and clean when every page was
// served. Only broken books' pages are wasted: an unfinished book is still
// on its way.
func booksOf(pages []page, prices gatewayv1.Prices) (books, clean, unfinished int, wasted int64) {
	broken, open := map[int]bool{}, map[int]bool{}
	for _, p := range pages {
		broken[p.user] = broken[p.user] || p.cause.failed()
		open[p.user] = open[p.user] || p.cause == CutOff
	}
	micro := prices.Micro()
	for _, p := range pages {
		if broken[p.user] && p.cause == Served {
			wasted += micro.CostMicros("", gatewayv1.Tokens{Prompt: p.promptTokens, Completion: p.completionTokens})
		}
	}
	for user, b := range broken {
		switch {
		case b:
		case open[user]:
			unfinished++
		default:
			clean++
		}
	}
	return len(broken), clean, unfinished, wasted
}

// firstFailure is the page that failed first, by its answer; ties go to
// the lower user, then page.
func firstFailure(pages []page, s schedule) *Failure {
	var first *page
	for i := range pages {
		p := &pages[i]
		if p.cause.failed() && (first == nil || earlier(p, first)) {
			first = p
		}
	}
	if first == nil {
		return nil
	}
	return &Failure{Users: s.usersAt(first.answered), AtSeconds: first.answered.Seconds(), Cause: first.cause}
}

func earlier(a, b *page) bool {
	return cmp.Or(cmp.Compare(a.answered, b.answered), cmp.Compare(a.user, b.user), cmp.Compare(a.index, b.index)) < 0
}

// servedWaits are the waits of the pages served, sorted.
func servedWaits(pages []page) []time.Duration {
	var waits []time.Duration
	for _, p := range pages {
		if p.cause == Served {
			waits = append(waits, p.answered-p.sent)
		}
	}
	slices.Sort(waits)
	return waits
}

// share is n over limit; 0 without a limit.
func share(n, limit int64) float64 {
	if limit <= 0 {
		return 0
	}
	return float64(n) / float64(limit)
}

// notes say what the numbers alone would hide.
func notes(r caseRun, out map[Cause]int) []string {
	var ns []string
	if n := out[Refused]; r.queued && n > 0 {
		ns = append(ns, fmt.Sprintf("the gateway, told to queue, refused %s with its own 429 (rate_limit_exceeded) instead: "+
			"for those pages this case measured refusal, not a queue", countPages(n)))
	}
	if n := out[CutOff]; n > 0 {
		ns = append(ns, fmt.Sprintf("%s had no answer when the case stopped at its cap, %s (%s); Jain's index and the estimate error, measured over whole books, are left out",
			countPages(n), r.limit, r.capFlag))
	} else if r.queued {
		ns = append(ns, fmt.Sprintf("ran until its books were done, in %s (its cap: %s, %s)", r.elapsed.Round(time.Second), r.limit, r.capFlag))
	}
	if n := retriedPages(r.pages); n > 0 {
		ns = append(ns, fmt.Sprintf("its clients sent %s again after the provider refused them, at most %d times each (--comebacks)", countPages(n), r.comebacks))
	}
	if n := out[NoAnswer]; n > 0 {
		ns = append(ns, fmt.Sprintf("%s got no answer: the connection failed", countPages(n)))
	}
	return ns
}

// retriedPages counts the pages sent again after the provider refused them.
func retriedPages(pages []page) int {
	n := 0
	for _, p := range pages {
		if p.retried > 0 {
			n++
		}
	}
	return n
}

// countPages is "1 page" or "n pages".
func countPages(n int) string {
	if n == 1 {
		return "1 page"
	}
	return fmt.Sprintf("%d pages", n)
}
