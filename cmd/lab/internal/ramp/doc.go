// Package ramp is the lab's load ramp: it adds users on a schedule, each
// uploading one book of pages (one chat completion a page), and shows where
// each way of calling a hosted provider breaks.
//
// Users are added every [Options.Step] until there are 1, 2, 3, 5, 8, 12, 20,
// 30, 50, then 80 of them ([Options.Users]). Each case runs against a fresh
// simulated provider (package provider) on a loopback port, so its limits
// start clean, and ends when every book has finished or after
// [Options.Duration] (the queue case after [Options.QueueCap]: it runs until
// its books are done). The cases:
//
//   - sequential: each user sends one page after another.
//   - burst: each user sends all its pages at once, nothing in front; the
//     HTTP client's pool is unbounded.
//   - reject: all at once through the gateway binary, which limits each user
//     to a token bucket (burst 5, 2 a second) and everyone together to the
//     provider's requests per minute, and refuses what is over (onLimit
//     Reject). The client does not retry a 429: the page dies.
//   - queue: the same through a gateway told to queue (onLimit Queue, maxWait
//     60s), which also paces on the provider's published requests, tokens and
//     calls in flight. A page the door turns away waits its Retry-After and
//     comes back, at most [Options.Comebacks] times.
//   - pool: all at once through one HTTP client whose transport holds at
//     most 200 connections to the provider: the pool becomes the queue. Its
//     clients send a page the provider refused again after its Retry-After,
//     at most [Options.Comebacks] times, as an SDK's client does.
//   - interactive: an interactive tenant at a steady rate beside a batch
//     tenant that sends twice what the provider serves.
//   - failover: the queue case for a model that two accounts serve, the
//     provider's and a second with a tenth of its limits (not in the default
//     cases). The first goes down at [Options.FailoverAt], its listener and
//     connections closed as a killed process's, and listens again
//     [Options.FailoverFor] later; the report tells what each account served
//     before, during and after the outage.
//
// A crowd may mix call sizes. The pages of a share of the users
// ([Options.LongUsers], spread evenly: at 0.5 every other user) are long
// ([Options.LongPromptTokens]), as an agent's transcripts are, and a few pages
// of the whole crowd ([Options.HugePages], spread evenly over its users'
// books) are huge, near the provider's whole minute
// ([Options.HugePromptTokens]). Prompts may be written in text that a
// gateway's encoding counts as the provider does, or more or less densely
// ([Options.Text]), code among them.
//
// A gateway case writes the gateway's configuration into a temporary
// directory: one tenant, "ramp", with one key and user per simulated user, so
// the per-user bucket applies to each user and the queue can give each user a
// lane of its own, while the configuration stays one tenant however many users
// there are. The gateway runs on free loopback ports until the case ends;
// with [Options.Gateways] above one, that many run, sharing their limits in a
// redis-server of the case's own, and user u sends to gateway u%Gateways.
//
// For each case the report gives the first failure (how many users had
// started, when, and why), the pages that died at the provider and those the
// gateway refused, the books that came out clean, what the provider billed
// and how much of it went to pages of broken books, the wait of the pages
// served (p50 and p95, from submit to answer), and the provider's peak tokens
// over a rolling minute as a share of its limit. A second table tells how
// fair the queue was and how true its door: the provider's 429s and 503s
// over the calls it received, its tokens while pages queued as a share of its
// limit, the gateway's refusals per page, Jain's index over the pages served
// to each user, the books whole, broken and on their way, the time to a whole
// book (p50, p95), and the p90 of the door's estimate's error, over every page
// that queued and over those that queued once the ramp's last users had
// arrived (no newcomer then takes turns ahead of them). Why a page failed is read
// from its answer alone: the status, the OpenAI error body's type, code and
// message, and the headers (see [Cause]). A third table tells how long the
// crowd took against the provider's own bound (the tokens it served over its
// tokens a minute) and the ramp's own length (when its last users arrived),
// and the provider's tokens in each minute after the first as a share of its
// limit, so that a provider left idle while pages wait is seen.
//
// The accounting is a pure function of what happened to each page and what
// the provider saw (summarize); the driver that makes it happen is separate.
package ramp
