package v1

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// microsPerDollar is the scale of MicroDollars: Money has at most six
// decimals, so every valid amount is a whole number of micro-dollars.
const microsPerDollar = 1_000_000

// moneyPattern is the syntax of a non-empty Money.
var moneyPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]{1,6})?$`)

// Money is a non-negative amount of US dollars written as a decimal string
// with at most six decimals, such as "0.50", "5000" or "3.00". It is never a
// float, so amounts add up exactly. The empty Money means unset and counts as
// zero.
type Money string

// MicroDollars returns m as an exact number of millionths of a dollar. It is
// an error if m is not a decimal like "0.50" or does not fit in an int64.
func (m Money) MicroDollars() (int64, error) {
	if m == "" {
		return 0, nil
	}
	if !moneyPattern.MatchString(string(m)) {
		return 0, fmt.Errorf("gatewayv1: money %q: must be a decimal dollar amount such as \"0.50\", with at most 6 decimals", string(m))
	}
	whole, frac, _ := strings.Cut(string(m), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	if err != nil || w > (math.MaxInt64-f)/microsPerDollar {
		return 0, fmt.Errorf("gatewayv1: money %q: too large", string(m))
	}
	return w*microsPerDollar + f, nil
}

// IsZero reports whether m is empty or an amount of zero, such as "0.00".
// It is false for a malformed m.
func (m Money) IsZero() bool {
	n, err := m.MicroDollars()
	return err == nil && n == 0
}

// MoneyFromMicro formats an amount of micro-dollars as Money with no trailing
// zeros: 2400 is "0.0024", 3000000 is "3". Money is never negative, so a
// negative amount (such as a budget overspent by settlement) formats as "0".
func MoneyFromMicro(micros int64) Money {
	if micros <= 0 {
		return "0"
	}
	whole := strconv.FormatInt(micros/microsPerDollar, 10)
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%microsPerDollar), "0")
	if frac == "" {
		return Money(whole)
	}
	return Money(whole + "." + frac)
}
