package metrics

import (
	"bytes"
	"errors"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseSkipping parses the Prometheus text format with expfmt, skipping
// each line the parser refuses (an OpenMetrics exemplar, a value such as
// -nan) rather than the whole page, and returns why each line was skipped.
// The series of a family that follow a skipped line lose the family's
// TYPE, and read as untyped. It fails only for an error no line is to
// blame for.
func parseSkipping(text []byte) (map[string]*dto.MetricFamily, []error, error) {
	if len(text) > 0 && text[len(text)-1] != '\n' {
		text = append(text, '\n') // the format ends each line; some pages omit the last
	}
	families := map[string]*dto.MetricFamily{}
	var skipped []error
	for line := 0; len(text) > 0; {
		good, bad, rest, err := parseUntilBadLine(text)
		if err != nil {
			return nil, nil, err
		}
		merge(families, good)
		if bad == nil {
			break
		}
		skipped = append(skipped, fmt.Errorf("line %d: %s", line+bad.Line, bad.Msg))
		line += bad.Line
		text = rest
	}
	return families, skipped, nil
}

// parseUntilBadLine parses text up to its first line the parser refuses,
// and returns the families of the lines before it, the parser's error, and
// the text after it. bad is nil if every line parsed.
func parseUntilBadLine(text []byte) (good map[string]*dto.MetricFamily, bad *expfmt.ParseError, rest []byte, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err == nil {
		return families, nil, nil, nil
	}
	var pe expfmt.ParseError
	if !errors.As(err, &pe) || pe.Line < 1 {
		return nil, nil, nil, err
	}
	// The parser keeps part of the line it refused; parse the lines
	// before it again, alone.
	before, after := splitAroundLine(text, pe.Line)
	families, err = parser.TextToMetricFamilies(bytes.NewReader(before))
	if err != nil {
		return nil, nil, nil, err
	}
	return families, &pe, after, nil
}

// splitAroundLine returns the lines of text before line n (counted from 1)
// and those after it.
func splitAroundLine(text []byte, n int) (before, after []byte) {
	start := 0
	for range n - 1 {
		i := bytes.IndexByte(text[start:], '\n')
		if i < 0 {
			return text, nil
		}
		start += i + 1
	}
	end := bytes.IndexByte(text[start:], '\n')
	if end < 0 {
		return text[:start], nil
	}
	return text[:start], text[start+end+1:]
}

// merge adds the families of src to dst; the series of a family in both
// join dst's.
func merge(dst, src map[string]*dto.MetricFamily) {
	for name, f := range src {
		if d, ok := dst[name]; ok {
			d.Metric = append(d.Metric, f.GetMetric()...)
			continue
		}
		dst[name] = f
	}
}
