package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
)

// An ending is how a call ended: what its ticket charges or gives back, the outcome it is
// counted under and what its access-log line says. The step that sees the end makes it, and
// Server.finish applies the first one made for a call; later ones do nothing.
type ending struct {
	outcome string
	// status is what the client was answered: the provider's status when its answer was passed
	// on, statusClientClosed when nobody read an answer.
	status int
	ticket ticketEnd
	// usage is what a settled call is charged, as the provider reported it or as counted.
	usage estimate.Usage
	// detail says why the call ended so, for the log; empty for a call served.
	detail string
}

// ticketEnd is what a call's end does to its ticket.
type ticketEnd int8

const (
	// keepTicket leaves the ticket alone: the call has none (it was refused or never read).
	keepTicket ticketEnd = iota
	// withdrawTicket gives back all the call took: it never went to its provider.
	withdrawTicket
	// refundTicket gives back what a call its provider did not serve took (see Ticket.Refund).
	refundTicket
	// settleTicket charges the call its usage in place of its estimate.
	settleTicket
	// followTicket leaves the ticket open: the call runs on in the background at its provider,
	// and the follower settles it when it ends (see follower).
	followTicket
)

// served is the end of a call its provider served: charged usage u, within what the call could
// have used.
func served(u estimate.Usage) ending {
	return ending{outcome: outcomeOK, status: http.StatusOK, ticket: settleTicket, usage: u}
}

// answered is the end of a call answered with e, whose ticket ends as te says.
func answered(e *apiError, te ticketEnd) ending {
	return ending{outcome: outcomeOf(e), status: e.status, ticket: te, detail: e.Message}
}

// clientGone is the end of a call whose client left, or was cut off for not reading, when
// (a phrase: "while queued", "mid-stream"), its ticket ending as te says.
func clientGone(outcome, when string, te ticketEnd, u estimate.Usage) ending {
	detail := "the client left " + when
	if outcome == outcomeClientTooSlow {
		detail = "the client read nothing for server.writeTimeout and was cut off " + when
	}
	return ending{outcome: outcome, status: statusClientClosed, ticket: te, usage: u, detail: detail}
}

// finish ends a call once, whatever ended it: its ticket is settled, refunded or withdrawn as e
// says, the call is counted under e's outcome, its access-log line is written and its span ends.
// A call that has ended already is left as it is.
func (s *Server) finish(c *call, e ending) {
	if !c.ended.CompareAndSwap(false, true) {
		return
	}
	if e.ticket == settleTicket {
		e = s.bounded(c, e)
	}
	if e.outcome == outcomeOK || e.ticket == followTicket {
		s.own(c, c.response, e.usage)
	}
	if e.ticket == followTicket {
		s.follower.start(c, c.response.ID)
	}
	micros := s.settle(c, e)
	s.logEnd(c, e, micros)
	s.metrics.observeGenAI(c, e, time.Now())
	s.metrics.requests.WithLabelValues(c.tenant(), c.provider(), e.outcome).Inc() // after the log: whoever reads the count finds the line
	endSpan(c, e, micros)
}

// bounded is e with its usage bounded by what the call could have used (see
// estimate.Usage.Within): usage reported, or counted, past it is charged the bound, and counted.
func (s *Server) bounded(c *call, e ending) ending {
	u, ok := e.usage.Within(c.estimate)
	if !ok {
		s.metrics.usageOutOfBounds.WithLabelValues(c.provider()).Inc()
		bound := fmt.Sprintf("its usage (%d prompt and %d completion tokens) was more than the call could have used; it was charged its bound",
			e.usage.PromptTokens, e.usage.CompletionTokens)
		e.detail, e.usage = strings.TrimPrefix(e.detail+"; "+bound, "; "), u
	}
	return e
}

// endTicket ends the call's ticket as e says and returns what it was charged in micro-dollars.
func (c *call) endTicket(e ending) int64 {
	t := c.ticket
	if t == nil {
		return 0
	}
	switch e.ticket {
	case withdrawTicket:
		t.Withdraw()
	case refundTicket:
		t.Refund()
	case settleTicket:
		t.Settle(e.usage)
	}
	return t.Charged().MicroDollars
}

// logEnd writes the call's access-log line: at info for a call served, refused or left by its
// client, at warn for one its provider failed, at error for one the gateway failed.
func (s *Server) logEnd(c *call, e ending, micros int64) {
	level := slog.LevelInfo
	switch e.outcome {
	case outcomeProviderError, outcomeUnreachable, outcomeStoreDown:
		level = slog.LevelWarn
	case outcomeInternalError:
		level = slog.LevelError
	}
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	now := time.Now()
	attrs := []slog.Attr{
		slog.String("request_id", c.requestID),
		slog.String("tenant", c.tenant()),
		slog.String("user", c.user()),
		slog.String("endpoint", string(c.endpoint)),
		slog.String("model", c.modelAsked()),
		slog.String("model_sent", c.modelSent),
		slog.String("provider", c.provider()),
		slog.Int("status", e.status),
		slog.String("outcome", e.outcome),
		slog.Int64("tokens_estimated", c.estimate.Total()),
		slog.Int64("prompt_tokens", e.usage.PromptTokens),
		slog.Int64("completion_tokens", e.usage.CompletionTokens),
		slog.String("cost", string(gatewayv1.MoneyFromMicro(micros))),
		slog.Int64("queued_ms", c.waited.Milliseconds()),
		slog.Int64("first_byte_ms", sinceArrival(c, c.answered).Milliseconds()),
		slog.Int64("duration_ms", sinceArrival(c, now).Milliseconds()),
	}
	if e.detail != "" {
		attrs = append(attrs, slog.String("detail", e.detail))
	}
	s.log.LogAttrs(context.Background(), level, "call ended", attrs...)
}

// sinceArrival is how long after the call arrived t came; zero when t is.
func sinceArrival(c *call, t time.Time) time.Duration {
	if t.IsZero() || c.arrived.IsZero() {
		return 0
	}
	return t.Sub(c.arrived)
}
