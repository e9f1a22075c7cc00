package v1

import (
	"fmt"
	"math"
	"math/bits"
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

// CostMicros returns what inputTokens prompt tokens and outputTokens
// completion tokens cost at p, in micro-dollars, rounded up so that spend is
// never under-counted. It is exact integer arithmetic; a cost past
// math.MaxInt64 micro-dollars saturates there. Negative token counts count
// as zero, and so does a malformed price, which a validated Config does not
// have.
func (p Prices) CostMicros(inputTokens, outputTokens int64) int64 {
	return p.Micro().CostMicros(inputTokens, outputTokens)
}

// MicroPrices are Prices read into micro-dollars per million tokens, once,
// so that costing a call parses nothing.
type MicroPrices struct {
	InputPerMillion, OutputPerMillion int64
}

// Micro reads p into micro-dollars; a malformed price, which a validated
// Config does not have, reads as zero.
func (p Prices) Micro() MicroPrices {
	in, _ := p.InputPerMillion.MicroDollars()
	out, _ := p.OutputPerMillion.MicroDollars()
	return MicroPrices{InputPerMillion: in, OutputPerMillion: out}
}

// CostMicros is Prices.CostMicros on prices already read.
func (p MicroPrices) CostMicros(inputTokens, outputTokens int64) int64 {
	hi, lo := mul(inputTokens, p.InputPerMillion)
	hi2, lo2 := mul(outputTokens, p.OutputPerMillion)
	lo, carry := bits.Add64(lo, lo2, 0)
	hi, _ = bits.Add64(hi, hi2, carry) // each product is below 2^126: no carry out
	return ceilDivMillion(hi, lo)
}

// mul returns the 128-bit product of two counts, a negative one counting as
// zero.
func mul(a, b int64) (hi, lo uint64) {
	if a <= 0 || b <= 0 {
		return 0, 0
	}
	return bits.Mul64(uint64(a), uint64(b))
}

// ceilDivMillion returns ⌈(hi·2^64 + lo) / 10^6⌉, saturated at
// math.MaxInt64.
func ceilDivMillion(hi, lo uint64) int64 {
	lo, carry := bits.Add64(lo, microsPerDollar-1, 0)
	hi += carry
	if hi >= microsPerDollar { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, microsPerDollar)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
