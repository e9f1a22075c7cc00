package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
)

func TestParseSkipping(t *testing.T) {
	tests := []struct {
		name string
		text string
		// want is each family's values, in order.
		want        map[string][]float64
		wantSkipped []string
	}{
		{
			name: "a clean page",
			text: "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"2\"} 2\nb 3\n",
			want: map[string][]float64{"a": {1, 2}, "b": {3}},
		},
		{
			name: "an empty page",
			text: "",
			want: map[string][]float64{},
		},
		{
			// An OpenMetrics exemplar, which the text format has no room for.
			name:        "an exemplar drops its own series and no other",
			text:        "# TYPE a gauge\na{x=\"1\"} 1\na{x=\"2\"} 2 # {trace_id=\"4bf92f3577b34da6\"} 2 1717000000.000\na{x=\"3\"} 3\nb 4\n",
			want:        map[string][]float64{"a": {1, 3}, "b": {4}},
			wantSkipped: []string{`line 3: expected integer as timestamp, got "#"`},
		},
		{
			// C's printf prints a negative NaN as -nan, which Go does not parse.
			name:        "a -nan value drops its own series",
			text:        "# TYPE a gauge\na{x=\"1\"} -nan\na{x=\"2\"} 2\n# TYPE b gauge\nb -nan\nc 5\n",
			want:        map[string][]float64{"a": {2}, "c": {5}},
			wantSkipped: []string{`line 2: expected float as value, got "-nan"`, `line 5: expected float as value, got "-nan"`},
		},
		{
			name: "a missing last newline is no error",
			text: "a 1\nb 2",
			want: map[string][]float64{"a": {1}, "b": {2}},
		},
		{
			name:        "a page that is not metrics skips every line",
			text:        "<html>\n<body>bad gateway</body>\n",
			want:        map[string][]float64{},
			wantSkipped: []string{"line 1: invalid metric name", "line 2: invalid metric name"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			families, skipped, err := parseSkipping([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, familyValues(families)); diff != "" {
				t.Errorf("families (-want +got):\n%s", diff)
			}
			var gotSkipped []string
			for _, err := range skipped {
				gotSkipped = append(gotSkipped, err.Error())
			}
			if diff := cmp.Diff(tc.wantSkipped, gotSkipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

func familyValues(families map[string]*dto.MetricFamily) map[string][]float64 {
	out := map[string][]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			v, _ := seriesValue(m)
			out[name] = append(out[name], v)
		}
	}
	return out
}
