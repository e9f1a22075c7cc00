package ramp

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/labrun"
)

// WriteTable writes the report as three tables, one case a row in each: what
// happened to the pages and the books, how fair the queue was and how true
// its door, and how long the crowd took against the provider's own bound; and
// the cases' notes under them.
func (r Report) WriteTable(w io.Writer) error {
	books, mixed := r.split()
	if err := labrun.WriteTable(w, tableHeader, books, CaseReport.row, "\n"); err != nil {
		return err
	}
	if err := labrun.WriteTable(w, doorHeader, books, CaseReport.doorRow, "\n"); err != nil {
		return err
	}
	footer := r.notes()
	if len(mixed) > 0 {
		footer = "\n"
	}
	if err := labrun.WriteTable(w, boundHeader, books, CaseReport.boundRow, footer); err != nil {
		return err
	}
	if len(mixed) == 0 {
		return nil
	}
	return labrun.WriteTable(w, mixedHeader, mixed, CaseReport.mixedRow, r.notes())
}

// split are the cases of books, and those of steady tenants.
func (r Report) split() (books, mixed []CaseReport) {
	for _, c := range r.Cases {
		if c.Mixed != nil {
			mixed = append(mixed, c)
		} else {
			books = append(books, c)
		}
	}
	return books, mixed
}

// mixedHeader is the first line of the interactive case's table.
const mixedHeader = "case\tinteractive p95\tprovider's own p95\tinteractive over provider\tinteractive served\tbatch served\tprovider 429+503"

// mixedRow is the interactive case's row.
func (c CaseReport) mixedRow() string {
	m := c.Mixed
	return fmt.Sprintf("%s\t%.2fs\t%.2fs\t%+.0f%%\t%d/%d\t%d/%d\t%.2f%%", c.Case, m.InteractiveP95Seconds, m.ProviderP95Seconds,
		100*(m.InteractiveP95Seconds/m.ProviderP95Seconds-1), m.Served[0], m.Sent[0], m.Served[1], m.Sent[1], 100*c.ProviderErrorShare)
}

// notes are the cases' notes, a line each, under the table.
func (r Report) notes() string {
	var s string
	for _, c := range r.Cases {
		for _, n := range c.Notes {
			s += fmt.Sprintf("%s: %s\n", c.Case, n)
		}
	}
	return s
}

// tableHeader is the table's first line, its cells separated by tabs.
const tableHeader = "case\tfirst failure\tdied at provider\trefused by us\tbusy, came back\tclean books\tunfinished\tbilled\tfor broken books\twait p50\twait p95\tpeak tokens/min"

// row is the case's row of the table.
func (c CaseReport) row() string {
	return fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%d/%d\t%d\t$%s\t$%s\t%.2fs\t%.2fs\t%.0f%% of limit",
		c.Case, c.FirstFailure.String(), c.DiedAtProvider, c.Refused, c.BusyAnswers, c.CleanBooks, c.Books, c.UnfinishedBooks,
		c.Billed, c.BilledForBrokenBooks, c.WaitP50Seconds, c.WaitP95Seconds, 100*c.PeakTokensShare)
}

// doorHeader is the second table's first line.
const doorHeader = "case\tprovider 429+503\ttokens/min while queued\trefusals/page\tJain over users\tbooks whole/broken/on way\twhole book p50\twhole book p95\testimate error p90 (after arrivals)"

// doorRow is the case's row of the second table.
func (c CaseReport) doorRow() string {
	return fmt.Sprintf("%s\t%.2f%%\t%s\t%.2f\t%s\t%d/%d/%d\t%s\t%s\t%s",
		c.Case, 100*c.ProviderErrorShare, orNone(c.BacklogTokensShare, "%.0f%% of limit", 100), c.RefusalsPerPage, orNone(c.JainOverUsers, "%.3f", 1),
		c.CleanBooks, c.BrokenBooks, c.UnfinishedBooks, orNone(c.WholeBookP50Seconds, "%.1fs", 1), orNone(c.WholeBookP95Seconds, "%.1fs", 1), c.estimateErrorCell())
}

// estimateErrorCell is the door's estimate error cell: over every page that queued, then over those
// that queued after the ramp's last arrivals; "-" when no page queued with an estimate.
func (c CaseReport) estimateErrorCell() string {
	if c.EstimateErrorP90 == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%s)", 100*c.EstimateErrorP90, orNone(c.EstimateErrorP90AfterArrivals, "%.0f%%", 100))
}

// boundHeader is the third table's first line.
const boundHeader = "case\ttook\tprovider's bound\tramp\ttook/bound\tprovider's tokens by minute, from the second"

// boundRow is the case's row of the third table.
func (c CaseReport) boundRow() string {
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", c.Case, roundSeconds(c.ElapsedSeconds), roundSeconds(c.ProviderBoundSeconds),
		roundSeconds(c.RampSeconds), orNone(c.TookOverBound, "%.2f×", 1), c.minutesCell())
}

// minutesCell is the provider's tokens in each minute after the first, as shares of its limit,
// the last marked with its length when the case's end cut it short; "-" for a case of a minute
// or less.
func (c CaseReport) minutesCell() string {
	if len(c.ProviderMinuteShares) < 2 {
		return "-"
	}
	cells := make([]string, 0, len(c.ProviderMinuteShares)-1)
	for _, x := range c.ProviderMinuteShares[1:] {
		cells = append(cells, fmt.Sprintf("%.0f%%", 100*x))
	}
	last := roundSeconds(c.ElapsedSeconds) - time.Duration(len(c.ProviderMinuteShares)-1)*window
	if last < window {
		cells[len(cells)-1] += fmt.Sprintf(" (last %s)", last)
	}
	return strings.Join(cells, ", ")
}

// roundSeconds is seconds as a duration, to the second.
func roundSeconds(seconds float64) time.Duration {
	return time.Duration(seconds * float64(time.Second)).Round(time.Second)
}

// orNone is x×scale in format, or "-" when x is zero: nothing was measured.
func orNone(x float64, format string, scale float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf(format, x*scale)
}

// String is the failure as the table writes it: "none" for nil.
func (f *Failure) String() string {
	if f == nil {
		return "none"
	}
	users := "users"
	if f.Users == 1 {
		users = "user"
	}
	return fmt.Sprintf("%d %s at %.1fs: %s", f.Users, users, f.AtSeconds, f.Cause.Label())
}

// WriteFiles writes the report into dir, which it creates if need be:
// report.json, and a chart for each case, <case>.png.
func (r Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("ramp: report directory: %w", err)
	}
	if err := labrun.WriteJSON(filepath.Join(dir, "report.json"), r); err != nil {
		return err
	}
	for _, c := range r.Cases {
		if err := writeChart(filepath.Join(dir, c.Case+".png"), c); err != nil {
			return err
		}
	}
	return nil
}
