package ramp

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Cause is how a page ended, as its client can tell from the answer.
type Cause string

// The causes. A page that failed at the provider is "died at the provider";
// one the gateway refused is "refused".
const (
	// Served is a page answered 200.
	Served Cause = "served"
	// ProviderTokens is the provider's 429 on its tokens per minute: error
	// type "tokens", or a message about tokens per min.
	ProviderTokens Cause = "provider429Tokens"
	// ProviderRequests is the provider's 429 on its requests per minute:
	// error type "requests", or a message about requests per min.
	ProviderRequests Cause = "provider429Requests"
	// ProviderOverloaded is the provider's 503 for too many calls in flight:
	// error type "overloaded_error" or code "overloaded".
	ProviderOverloaded Cause = "provider503"
	// Refused is the gateway's own 429: any other 429.
	Refused Cause = "refused429"
	// Busy is the gateway's queue refusing at the door: a 429 with code
	// queue_busy or a queue position (X-Sluice-Queue-Position, or
	// X-Queue-Position as the design first named it).
	Busy Cause = "busyAtTheDoor"
	// OtherError is any other answer.
	OtherError Cause = "otherError"
	// NoAnswer is a call that got no answer: the connection failed.
	NoAnswer Cause = "noAnswer"
	// CutOff is a page without an answer when its case ended.
	CutOff Cause = "cutOff"
)

// causeLabels are the causes as the table writes them.
var causeLabels = map[Cause]string{
	Served:             "served",
	ProviderTokens:     "provider 429 on tokens",
	ProviderRequests:   "provider 429 on requests",
	ProviderOverloaded: "provider 503",
	Refused:            "our own 429",
	Busy:               "busy at the door",
	OtherError:         "another error",
	NoAnswer:           "no answer",
	CutOff:             "cut off",
}

// Label is the cause in words.
func (c Cause) Label() string {
	if l, ok := causeLabels[c]; ok {
		return l
	}
	return string(c)
}

// diedAtProvider reports whether the provider refused the page.
func (c Cause) diedAtProvider() bool {
	return c == ProviderTokens || c == ProviderRequests || c == ProviderOverloaded
}

// refused reports whether the gateway refused the page.
func (c Cause) refused() bool { return c == Refused || c == Busy }

// failed reports whether the page was answered with an error or none
// before its case ended.
func (c Cause) failed() bool { return c != Served && c != CutOff }

// apiError is the part of OpenAI's error body that tells causes apart.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

// classify tells how a page ended from its answer: the status, the headers
// and the body, an OpenAI error body unless it was served.
func classify(status int, h http.Header, body []byte) Cause {
	if status == http.StatusOK {
		return Served
	}
	var e struct {
		Error apiError `json:"error"`
	}
	_ = json.Unmarshal(body, &e) // a body that is not an error body tells nothing
	switch status {
	case http.StatusTooManyRequests:
		return classify429(h, e.Error)
	case http.StatusServiceUnavailable:
		if e.Error.Type == "overloaded_error" || e.Error.Code == "overloaded" {
			return ProviderOverloaded
		}
	}
	return OtherError
}

// classify429 tells the provider's 429s (which name the limit in the type
// and the message) from the gateway's.
func classify429(h http.Header, e apiError) Cause {
	switch {
	case e.Type == "tokens", strings.Contains(e.Message, "tokens per min"):
		return ProviderTokens
	case e.Type == "requests", strings.Contains(e.Message, "requests per min"):
		return ProviderRequests
	case e.Code == "queue_busy", h.Get("X-Sluice-Queue-Position") != "", h.Get("X-Queue-Position") != "":
		return Busy
	}
	return Refused
}
