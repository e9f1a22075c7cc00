package ramp

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/gatewayproc"
	"github.com/sluicehq/sluice/cmd/lab/internal/ladder"
	"github.com/sluicehq/sluice/cmd/lab/internal/provider"
)

// maxMaxWait is the longest maxWait the gateway's configuration accepts.
const maxMaxWait = 10 * time.Minute

// Options configure a ramp. Start from DefaultOptions: in the zero Options
// every count is zero, which Run refuses.
type Options struct {
	// Provider is the simulated provider's account, started afresh for
	// each case.
	Provider provider.Options
	// Users are how many users there are after each step, increasing: the
	// first are there at the start, the next one step later, and so on.
	Users []int
	// Step is the time between two counts of Users; must be positive.
	Step time.Duration
	// Pages is the pages in each user's book; must be positive.
	Pages int
	// PromptTokens is a page's prompt, in the provider's tokens; must be
	// positive.
	PromptTokens int64
	// MaxTokens is a page's max_tokens, the answer's length; must be
	// positive.
	MaxTokens int64
	// SizeSpread spreads the pages' sizes: page i's prompt and max_tokens are
	// PromptTokens and MaxTokens times a factor between 1-SizeSpread and
	// 1+SizeSpread, the same for every book. At least 0, less than 1.
	SizeSpread float64
	// Text is what a page's prompt is written in: TextFiller, TextDense,
	// TextSparse or TextCode, text that a gateway's encoding counts as the
	// provider does, less densely or more densely.
	Text string
	// LongPromptTokens is a long page's prompt, in the provider's tokens:
	// the pages of LongUsers of the users are long, as an agent's
	// transcripts are. Zero means no page is long.
	LongPromptTokens int64
	// LongMaxTokens is a long page's max_tokens. Zero means MaxTokens.
	LongMaxTokens int64
	// LongUsers is the share of users whose pages are long, spread evenly
	// over them (at 0.5 every other user); more than 0 and at most 1. It
	// matters only with LongPromptTokens.
	LongUsers float64
	// HugePages counts the huge pages of the whole crowd, calls near the
	// provider's whole minute, spread evenly over its users and their books.
	// Zero means none; at most the crowd's pages.
	HugePages int
	// HugePromptTokens is a huge page's prompt, in the provider's tokens;
	// its max_tokens is MaxTokens. Positive with HugePages, zero without.
	HugePromptTokens int64
	// Duration caps each case but the queue; a case ends sooner when every
	// book has finished. Must be positive.
	Duration time.Duration
	// QueueCap caps the queue case, which runs until its books are done: it
	// neither breaks nor drops a page, so a shorter run would show books on
	// their way rather than how long they take. Must be positive.
	QueueCap time.Duration
	// Cases name the cases to run, in order: some of sequential, burst,
	// reject, queue, pool, interactive and failover.
	Cases []string
	// Gateway is the path of the gateway binary, for the reject and queue
	// cases.
	Gateway string
	// Gateways is how many gateway processes a case starts: more than one share their limits in
	// a redis-server of the case's own (RedisServer), and user u sends to gateway u%Gateways, as
	// a Service would spread them. Must be positive; ignored with GatewayURLs.
	Gateways int
	// SpreadPages sends a book's pages to the gateways in turn, page i to gateway i%Gateways,
	// rather than all to its user's: clients whose calls a Service spreads one by one.
	SpreadPages bool
	// RedisServer is the path of the redis-server binary, for Gateways above one.
	RedisServer string
	// GatewayURLs are running gateways to send the reject and queue cases'
	// pages to, instead of starting one: user u sends to
	// GatewayURLs[u%len(GatewayURLs)] with the key sk-ramp-user-<u, three
	// digits>-0123456789abcdef0123, and the gateways must know those keys and send to the
	// provider at ProviderAddr. Empty means a gateway of the case's own.
	GatewayURLs []string
	// ProviderAddr is where each case's provider listens. Empty means a free
	// loopback port.
	ProviderAddr string
	// PoolConns caps the pool case's connections to the provider; must be
	// positive.
	PoolConns int
	// UserBurst is the gateway's per-user bucket: its capacity; must be
	// positive.
	UserBurst int64
	// UserRate is the gateway's per-user bucket: requests a second; must be
	// positive.
	UserRate int64
	// Comebacks caps how often a page the queue's door turned away waits its Retry-After and
	// comes back; turned away once more, it is refused. Zero means it never comes back.
	Comebacks int
	// InteractiveRate is the interactive case's calls a second from its
	// interactive tenant; must be positive.
	InteractiveRate float64
	// MaxWait is the queue's door: the longest wait the gateway accepts
	// before it answers busy. More than zero and at most 10m.
	MaxWait time.Duration
	// FailoverAt is when, from its start, the failover case takes its first
	// provider down (its listener and every connection closed, as a process
	// killed), and FailoverFor how long until it listens again; both
	// positive.
	FailoverAt, FailoverFor time.Duration
}

// The cases, in the order Run runs them by default.
const (
	CaseSequential = "sequential"
	CaseBurst      = "burst"
	CaseReject     = "reject"
	CaseQueue      = "queue"
	CasePool       = "pool"
	// CaseInteractive is an interactive tenant beside a batch tenant that
	// sends twice what the provider serves, through the gateway's queue.
	CaseInteractive = "interactive"
	// CaseFailover is the queue case in front of a pool of two accounts, the
	// second with a tenth of the first's limits, the first down for a while
	// in the middle of the crowd.
	CaseFailover = "failover"
)

// DefaultOptions is the reference ramp: the lab's reference provider
// (1,500 RPM, 300,000 TPM, 200 in flight, $3 per million tokens, about 2 s a
// call), users 1 to 80 every 3 s, books of 100 pages of 600 prompt tokens and
// 200 completion tokens, every case for at most 5 minutes, the gateway at
// bin/gateway.
func DefaultOptions() Options {
	return Options{
		Provider:        provider.DefaultOptions(),
		Users:           []int{1, 2, 3, 5, 8, 12, 20, 30, 50, 80},
		Step:            3 * time.Second,
		Pages:           100,
		PromptTokens:    600,
		MaxTokens:       200,
		Text:            TextFiller,
		LongUsers:       0.5,
		Duration:        5 * time.Minute,
		QueueCap:        10 * time.Minute,
		Cases:           []string{CaseSequential, CaseBurst, CaseReject, CaseQueue, CasePool, CaseInteractive},
		InteractiveRate: 5,
		Gateway:         gatewayproc.DefaultBinary,
		Gateways:        1,
		RedisServer:     gatewayproc.DefaultRedisServer,
		PoolConns:       200,
		UserBurst:       5,
		UserRate:        2,
		Comebacks:       3,
		MaxWait:         time.Minute,
		FailoverAt:      30 * time.Second,
		FailoverFor:     30 * time.Second,
	}
}

// AddFlags registers a flag for every field of o on fs, the provider's
// included (see provider.Options.AddFlags), with o's values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	o.Provider.AddFlags(fs)
	fs.Var((*ladder.Ladder)(&o.Users), "users", "comma-separated user counts, one per step, increasing")
	fs.DurationVar(&o.Step, "step", o.Step, "time between two user counts")
	fs.IntVar(&o.Pages, "pages", o.Pages, "pages in each user's book, one chat completion each")
	fs.Int64Var(&o.PromptTokens, "prompt-tokens", o.PromptTokens, "tokens of a page's prompt")
	fs.Int64Var(&o.MaxTokens, "max-tokens", o.MaxTokens, "a page's max_tokens: the answer's length")
	fs.Float64Var(&o.SizeSpread, "size-spread", o.SizeSpread, "spread of the pages' prompts and max_tokens: each between 1-s and 1+s times its size, from 0 to below 1")
	fs.StringVar(&o.Text, "text", o.Text, "what the prompts are written in: filler (the encoding counts four bytes a token, as the provider), dense (fewer tokens by the encoding), sparse (more) or code (a quarter more)")
	fs.Int64Var(&o.LongPromptTokens, "long-prompt-tokens", o.LongPromptTokens, "tokens of a long page's prompt, sent by a share of the users (--long-users); 0 for none")
	fs.Int64Var(&o.LongMaxTokens, "long-max-tokens", o.LongMaxTokens, "a long page's max_tokens; 0 for --max-tokens")
	fs.Float64Var(&o.LongUsers, "long-users", o.LongUsers, "the share of users whose pages are long, spread evenly (0.5: every other user), with --long-prompt-tokens")
	fs.IntVar(&o.HugePages, "huge-pages", o.HugePages, "huge pages in the whole crowd, spread evenly over its users' books, each of --huge-prompt-tokens")
	fs.Int64Var(&o.HugePromptTokens, "huge-prompt-tokens", o.HugePromptTokens, "tokens of a huge page's prompt, near the provider's whole minute; its max_tokens is --max-tokens")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "the longest a case but the queue runs; it ends sooner when every book has finished")
	fs.DurationVar(&o.QueueCap, "queue-cap", o.QueueCap, "the longest the queue case runs; it runs until its books are done")
	fs.Func("cases", "comma-separated cases to run, in order (default "+strings.Join(o.Cases, ",")+")", o.setCases)
	gatewayproc.AddFlag(fs, &o.Gateway, "path of the gateway binary, for the reject and queue cases")
	fs.IntVar(&o.Gateways, "gateways", o.Gateways, "gateway processes a case starts; more than one share their limits in a redis-server of the case's own")
	fs.BoolVar(&o.SpreadPages, "spread-pages", o.SpreadPages, "send a book's pages to the gateways in turn, not all to its user's")
	fs.StringVar(&o.RedisServer, "redis-server", o.RedisServer, "path of the redis-server binary, for --gateways above 1")
	fs.Func("gateway-url", "a running gateway's base URL for the reject and queue cases, instead of starting one; repeat to spread the users over several", o.addGatewayURL)
	fs.Func("provider-addr", "where each case's provider listens, a loopback host:port; empty means a free loopback port", o.setProviderAddr)
	fs.IntVar(&o.PoolConns, "pool-conns", o.PoolConns, "the pool case's cap on connections to the provider")
	fs.Int64Var(&o.UserBurst, "user-burst", o.UserBurst, "the gateway's per-user bucket: its capacity")
	fs.Int64Var(&o.UserRate, "user-rate", o.UserRate, "the gateway's per-user bucket: requests a second")
	fs.IntVar(&o.Comebacks, "comebacks", o.Comebacks, "how often a page the queue's door turned away comes back after its Retry-After before it gives up")
	fs.Float64Var(&o.InteractiveRate, "interactive-rate", o.InteractiveRate, "the interactive case's calls a second from its interactive tenant")
	fs.DurationVar(&o.MaxWait, "max-wait", o.MaxWait, "the queue case's door: the longest wait the gateway accepts")
	fs.DurationVar(&o.FailoverAt, "failover-at", o.FailoverAt, "when, from its start, the failover case takes its first provider down")
	fs.DurationVar(&o.FailoverFor, "failover-for", o.FailoverFor, "how long the failover case's first provider stays down")
}

// addGatewayURL adds a running gateway's base URL. The lab's load stays on this machine: the
// gateway must be on a loopback address.
func (o *Options) addGatewayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !isLoopback(u.Hostname()) {
		return fmt.Errorf("want a gateway's base URL on a loopback address, such as http://127.0.0.1:8080, not %q", s)
	}
	o.GatewayURLs = append(o.GatewayURLs, strings.TrimSuffix(s, "/"))
	return nil
}

// setProviderAddr sets where the cases' provider listens: a loopback address.
func (o *Options) setProviderAddr(s string) error {
	host, _, err := net.SplitHostPort(s)
	if err != nil || !isLoopback(host) {
		return fmt.Errorf("want a loopback host:port, such as 127.0.0.1:8081, not %q", s)
	}
	o.ProviderAddr = s
	return nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}

func (o *Options) setCases(s string) error {
	o.Cases = nil
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			o.Cases = append(o.Cases, f)
		}
	}
	return nil
}

// validate reports the first option Run cannot run with.
func (o Options) validate() error {
	switch {
	case !ladder.Ladder(o.Users).Increasing():
		return errors.New("ramp: options: Users must be positive and increasing")
	case o.Step <= 0, o.Duration <= 0, o.QueueCap <= 0, o.FailoverAt <= 0, o.FailoverFor <= 0:
		return errors.New("ramp: options: Step, Duration, QueueCap, FailoverAt and FailoverFor must be positive")
	case o.Pages <= 0, o.PromptTokens <= 0, o.MaxTokens <= 0:
		return errors.New("ramp: options: Pages, PromptTokens and MaxTokens must be positive")
	case o.PoolConns <= 0, o.UserBurst <= 0, o.UserRate <= 0, o.Gateways <= 0:
		return errors.New("ramp: options: PoolConns, UserBurst, UserRate and Gateways must be positive")
	case o.InteractiveRate <= 0:
		return errors.New("ramp: options: InteractiveRate must be positive")
	case o.SizeSpread < 0 || o.SizeSpread >= 1:
		return errors.New("ramp: options: SizeSpread must be at least 0 and less than 1")
	case o.Comebacks < 0:
		return errors.New("ramp: options: Comebacks must not be negative")
	case o.MaxWait <= 0 || o.MaxWait > maxMaxWait:
		return fmt.Errorf("ramp: options: MaxWait must be more than 0s and at most %s", maxMaxWait)
	case len(o.Provider.Models) == 0:
		return errors.New("ramp: options: the provider must serve a model")
	}
	if err := validateText(o.Text); err != nil {
		return err
	}
	if err := o.validateCrowd(); err != nil {
		return err
	}
	return validateCases(o.Cases)
}

// validateCrowd reports the first option of the crowd's mix of page sizes that Run cannot run
// with.
func (o Options) validateCrowd() error {
	switch {
	case o.LongPromptTokens < 0, o.LongMaxTokens < 0, o.HugePages < 0, o.HugePromptTokens < 0:
		return errors.New("ramp: options: LongPromptTokens, LongMaxTokens, HugePages and HugePromptTokens must not be negative")
	case o.LongUsers <= 0 || o.LongUsers > 1:
		return errors.New("ramp: options: LongUsers must be more than 0 and at most 1")
	case o.LongMaxTokens > 0 && o.LongPromptTokens == 0:
		return errors.New("ramp: options: LongMaxTokens must be 0 without LongPromptTokens")
	case (o.HugePages > 0) != (o.HugePromptTokens > 0):
		return errors.New("ramp: options: HugePages and HugePromptTokens must be set together")
	case o.HugePages > o.crowdPages():
		return fmt.Errorf("ramp: options: HugePages must be at most the crowd's %d pages", o.crowdPages())
	}
	if limit, largest := o.Provider.TokensPerMinute, o.largestPage(); limit > 0 && largest > limit {
		return fmt.Errorf("ramp: options: every page must fit in the provider's %d TokensPerMinute: the largest counts %d", limit, largest)
	}
	return nil
}

// longMaxTokens is a long page's max_tokens.
func (o Options) longMaxTokens() int64 { return cmp.Or(o.LongMaxTokens, o.MaxTokens) }

// crowdPages counts the pages of every book of the crowd: one book for each of its last users.
func (o Options) crowdPages() int { return o.Users[len(o.Users)-1] * o.Pages }

// largestPage is the most tokens a page of the crowd counts at the provider, its prompt and
// max_tokens.
func (o Options) largestPage() int64 {
	var scale float64
	for i := range o.Pages {
		scale = max(scale, pageScale(i, o.SizeSpread))
	}
	largest := scaled(o.PromptTokens, scale) + scaled(o.MaxTokens, scale)
	if o.LongPromptTokens > 0 {
		largest = max(largest, scaled(o.LongPromptTokens, scale)+scaled(o.longMaxTokens(), scale))
	}
	if o.HugePages > 0 {
		largest = max(largest, o.HugePromptTokens+o.MaxTokens)
	}
	return largest
}

func validateCases(names []string) error {
	if len(names) == 0 {
		return errors.New("ramp: options: Cases must name at least one case")
	}
	for i, n := range names {
		if _, ok := caseNamed(n); !ok {
			return fmt.Errorf("ramp: options: unknown case %q: must be one of %s", n, strings.Join(caseNames(), ", "))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("ramp: options: case %q is named twice", n)
		}
	}
	return nil
}

// servedPerSecond is the pages a second the provider serves at most: its
// requests or its tokens a minute, whichever runs out first.
func (o Options) servedPerSecond() float64 {
	p := o.Provider
	return min(float64(p.RequestsPerMinute), float64(p.TokensPerMinute)/float64(o.PromptTokens+o.MaxTokens)) / 60
}
