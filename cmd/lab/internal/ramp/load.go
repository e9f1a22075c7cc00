package ramp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
	"github.com/sluicehq/sluice/cmd/lab/internal/openai"
)

// maxAnswerBytes bounds how much of an answer a page reads.
const maxAnswerBytes = 1 << 20

// target is where a case's pages go.
type target struct {
	// urls are the base URLs, without /v1 (see load.urlOf).
	urls []string
	// key is the API key user sends; empty sends none.
	key func(user int) string
}

// load is one case's users uploading their books. It is safe for
// concurrent use once started.
type load struct {
	kase   kase
	opts   Options
	client *http.Client
	target target
	bodies crowdBodies
	start  time.Time

	mu    sync.Mutex
	pages []page

	// For the progress lines.
	served, diedAtProvider, refused, busy, inFlight atomic.Int64
}

// run adds users on the schedule until every count is reached or ctx
// ends, writing a line to progress at each step, and returns when every
// book started has finished.
func (l *load) run(ctx context.Context, progress io.Writer) {
	var books sync.WaitGroup
	started := 0
	for k, n := range l.opts.Users {
		if !labrun.SleepUntil(ctx, l.start.Add(time.Duration(k)*l.opts.Step)) {
			break
		}
		for ; started < n; started++ {
			user := started
			books.Go(func() { l.book(ctx, user) })
		}
		l.progress(progress, k, n)
	}
	books.Wait()
}

// steady sends, until ctx ends, user 0's calls at InteractiveRate a second
// and user 1's at twice what the provider serves, each call a page of its
// own, and returns when every call has an answer.
func (l *load) steady(ctx context.Context, progress io.Writer) {
	var calls sync.WaitGroup
	calls.Go(func() { l.every(ctx, 0, l.opts.InteractiveRate, &calls) })
	calls.Go(func() { l.every(ctx, 1, 2*l.opts.servedPerSecond(), &calls) })
	for k := range l.opts.Users {
		if !labrun.SleepUntil(ctx, l.start.Add(time.Duration(k)*l.opts.Step)) {
			break
		}
		l.progress(progress, k, 2)
	}
	calls.Wait()
}

// every sends a page of user's perSecond times a second until ctx ends.
func (l *load) every(ctx context.Context, user int, perSecond float64, calls *sync.WaitGroup) {
	gap := time.Duration(float64(time.Second) / perSecond)
	for i := 0; labrun.SleepUntil(ctx, l.start.Add(time.Duration(i)*gap)); i++ {
		calls.Go(func() { l.record(l.page(ctx, user, i)) })
	}
}

// book uploads one user's book, page after page or all at once.
func (l *load) book(ctx context.Context, user int) {
	if !l.kase.allAtOnce {
		for i := range l.opts.Pages {
			l.record(l.page(ctx, user, i))
		}
		return
	}
	var pages sync.WaitGroup
	for i := range l.opts.Pages {
		pages.Go(func() { l.record(l.page(ctx, user, i)) })
	}
	pages.Wait()
}

// page sends one page and tells how it ended. A page whose case has ended
// is not sent: it is cut off.
func (l *load) page(ctx context.Context, user, index int) page {
	p := page{user: user, index: index, sent: time.Since(l.start)}
	if ctx.Err() != nil {
		p.answered, p.cause = p.sent, CutOff
		return p
	}
	l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	for {
		attempt := time.Since(l.start)
		a, err := l.post(ctx, user, index)
		p.answered = time.Since(l.start)
		switch {
		case err != nil && ctx.Err() != nil:
			p.cause = CutOff
		case err != nil:
			p.cause = NoAnswer
		default:
			p.cause = classify(a.status, a.header, a.body)
			p.promptTokens, p.completionTokens = a.usage()
			if p.cause == Served {
				p.door = doorOf(attempt, a.header)
			}
		}
		if !l.comesBack(&p) {
			return p
		}
		if !labrun.SleepUntil(ctx, time.Now().Add(retryAfter(a.header))) {
			p.answered, p.cause = time.Since(l.start), CutOff
			return p
		}
	}
}

// comesBack reports whether the page is sent again after its answer, and
// counts it: turned away at the door of a case whose clients honour it, or
// refused by the provider in a case whose clients retry, at most Comebacks
// times in all.
func (l *load) comesBack(p *page) bool {
	door := p.cause == Busy && l.kase.honoursDoor
	provider := p.cause.diedAtProvider() && l.kase.retries
	if (!door && !provider) || p.busy+p.retried >= l.opts.Comebacks {
		return false
	}
	if door {
		p.busy++
		l.busy.Add(1)
	} else {
		p.retried++
	}
	return true
}

// retryAfter is the wait a busy answer asked for, at least a second.
func retryAfter(h http.Header) time.Duration {
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || secs < 1 {
		return time.Second
	}
	return time.Duration(secs) * time.Second
}

// doorOf is what a gateway's answer to an attempt sent at attempt says of its queue: nothing
// for an answer that did not queue.
func doorOf(attempt time.Duration, h http.Header) door {
	waited, estimated := headerMillis(h, "X-Sluice-Queue-Wait-Ms"), headerMillis(h, "X-Sluice-Queue-Estimate-Ms")
	if waited <= 0 && estimated <= 0 {
		return door{}
	}
	return door{queued: attempt, dispatched: attempt + waited, estimated: estimated}
}

// headerMillis is a header of milliseconds; 0 when absent or not a number.
func headerMillis(h http.Header, name string) time.Duration {
	ms, err := strconv.ParseInt(h.Get(name), 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// answer is an answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// urlOf is where a user's page goes: a book's pages go where its user's
// connections are kept, unless SpreadPages, and the steady case's calls are
// spread over the targets one by one.
func (l *load) urlOf(user, index int) string {
	if l.kase.steady || l.opts.SpreadPages {
		return l.target.urls[index%len(l.target.urls)]
	}
	return l.target.urls[user%len(l.target.urls)]
}

// post sends the page's request as user.
func (l *load) post(ctx context.Context, user, index int) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.urlOf(user, index)+openai.Chat.Path(), bytes.NewReader(l.bodies.of(user, index)))
	if err != nil {
		return answer{}, fmt.Errorf("ramp: new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key := l.target.key(user); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("ramp: post a page: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return answer{}, fmt.Errorf("ramp: read an answer: %w", err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// usage is the prompt and completion tokens of a served answer; zero for
// any other.
func (a answer) usage() (prompt, completion int64) {
	var body struct {
		Usage openai.Usage `json:"usage"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &body) != nil {
		return 0, 0
	}
	return body.Usage.PromptTokens, body.Usage.CompletionTokens
}

// record keeps how a page ended.
func (l *load) record(p page) {
	switch {
	case p.cause == Served:
		l.served.Add(1)
	case p.cause.diedAtProvider():
		l.diedAtProvider.Add(1)
	case p.cause.refused():
		l.refused.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pages = append(l.pages, p)
}

// recorded are the pages recorded so far.
func (l *load) recorded() []page {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]page(nil), l.pages...)
}

// progress writes the line of step k, at which the ramp reached users.
func (l *load) progress(w io.Writer, k, users int) {
	fmt.Fprintf(w, "%-10s step %2d/%d %7.1fs  users %4d  served %6d  died at provider %6d  refused %6d  busy %6d  in flight %5d\n",
		l.kase.name, k+1, len(l.opts.Users), time.Since(l.start).Seconds(), users,
		l.served.Load(), l.diedAtProvider.Load(), l.refused.Load(), l.busy.Load(), l.inFlight.Load())
}
