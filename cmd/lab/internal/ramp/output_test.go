package ramp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// twoCases is a report of a clean case and a broken one.
func twoCases() Report {
	return Report{
		Settings: Settings{Users: []int{1, 2}, StepSeconds: 3, PagesPerBook: 2},
		Cases: []CaseReport{{
			Case: "sequential", Books: 2, CleanBooks: 2, Pages: 4, Outcomes: map[Cause]int{Served: 4},
			Billed: "0.0096", BilledForBrokenBooks: "0", WaitP50Seconds: 2, WaitP95Seconds: 2.4, PeakTokensShare: 0.32,
			JainOverUsers: 1, WholeBookP50Seconds: 4, WholeBookP95Seconds: 8,
			Series: Series{BucketSeconds: 1, StepsAtSeconds: []float64{0, 3}, Points: []Point{{AtSeconds: 0}, {AtSeconds: 1, PagesPerSecond: 2, MeanWaitSeconds: 2}}},
		}, {
			Case: "queue", ElapsedSeconds: 259.2, Books: 2, CleanBooks: 0, BrokenBooks: 2, Pages: 4, Outcomes: map[Cause]int{Served: 2, Refused: 2},
			Refused: 2, FirstFailure: &Failure{Users: 1, AtSeconds: 0.25, Cause: Refused},
			Billed: "0.0048", BilledForBrokenBooks: "0.0048", WaitP50Seconds: 2, WaitP95Seconds: 2, PeakTokensShare: 0.16,
			ProviderErrorShare: 0.0075, BacklogTokensShare: 0.98, RefusalsPerPage: 1.25, JainOverUsers: 0.8, EstimateErrorP90: 0.12, EstimateErrorP90AfterArrivals: 0.05,
			ProviderBoundSeconds: 224, RampSeconds: 27, TookOverBound: 259.2 / 224, ProviderMinuteShares: []float64{0.99, 0.97, 0.4, 0.54, 0.13},
			Series: Series{BucketSeconds: 1, StepsAtSeconds: []float64{0, 3}, Points: []Point{{AtSeconds: 0, ProviderErrorsPerSecond: 3}}},
			Notes:  []string{"the gateway refused 2 pages"},
		}},
	}
}

func TestWriteTable(t *testing.T) {
	var out bytes.Buffer
	if err := twoCases().WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	want := `case        first failure                died at provider  refused by us  busy, came back  clean books  unfinished  billed   for broken books  wait p50  wait p95  peak tokens/min
sequential  none                         0                 0              0                2/2          0           $0.0096  $0                2.00s     2.40s     32% of limit
queue       1 user at 0.2s: our own 429  0                 2              0                0/2          0           $0.0048  $0.0048           2.00s     2.00s     16% of limit

case        provider 429+503  tokens/min while queued  refusals/page  Jain over users  books whole/broken/on way  whole book p50  whole book p95  estimate error p90 (after arrivals)
sequential  0.00%             -                        0.00           1.000            2/0/0                      4.0s            8.0s            -
queue       0.75%             98% of limit             1.25           0.800            0/2/0                      -               -               12% (5%)

case        took   provider's bound  ramp  took/bound  provider's tokens by minute, from the second
sequential  0s     0s                0s    -           -
queue       4m19s  3m44s             27s   1.16×       97%, 40%, 54%, 13% (last 19s)
queue: the gateway refused 2 pages
`
	if diff := cmp.Diff(out.String(), want); diff != "" {
		t.Errorf("table mismatch (-got +want):\n%s", diff)
	}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	rep := twoCases()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if diff := cmp.Diff(got, rep); diff != "" {
		t.Errorf("report.json mismatch (-got +want):\n%s", diff)
	}
	for _, c := range rep.Cases {
		png, err := os.ReadFile(filepath.Join(dir, c.Case+".png"))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s.png is not a PNG (%v)", c.Case, err)
		}
	}
}
