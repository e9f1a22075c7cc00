package ramp

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// panel is one of a chart's panels: a title and its lines.
type panel struct {
	title string
	lines []line
}

// line is one line of a panel: its name in the legend (none for a panel's
// only line) and the value it draws of each point, if the point has one.
type line struct {
	name  string
	value func(Point) (float64, bool)
}

// always is a value every point has.
func always(v func(Point) float64) func(Point) (float64, bool) {
	return func(p Point) (float64, bool) { return v(p), true }
}

var panels = []panel{
	{"pages served per second", []line{{"", always(func(p Point) float64 { return p.PagesPerSecond })}}},
	{"provider errors (429, 503) per second", []line{{"", always(func(p Point) float64 { return p.ProviderErrorsPerSecond })}}},
	// A bucket without a page served has no wait, rather than a wait of 0.
	{"mean wait of the pages served (s)", []line{{"", func(p Point) (float64, bool) { return p.MeanWaitSeconds, p.PagesPerSecond > 0 }}}},
	{"pages served per user so far", []line{
		{"most", always(func(p Point) float64 { return p.UserPagesMost })},
		{"median", always(func(p Point) float64 { return p.UserPagesMedian })},
		{"least", always(func(p Point) float64 { return p.UserPagesLeast })},
	}},
}

// lineColors tell a panel's lines apart.
var lineColors = []color.Color{color.Black, color.RGBA{R: 200, A: 255}, color.RGBA{B: 200, A: 255}}

// writeChart draws a case's series as a PNG at path: one panel for each of
// panels, stacked, over the same time axis, with the ramp's steps marked.
func writeChart(path string, c CaseReport) error {
	plots := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		pl, err := panelPlot(c.Series, p)
		if err != nil {
			return fmt.Errorf("ramp: chart of %s: %w", c.Case, err)
		}
		plots[i] = []*plot.Plot{pl}
	}
	plots[0][0].Title.Text = headline(c) + " (dashed lines: users added)"
	plots[len(plots)-1][0].X.Label.Text = "seconds since the case started"
	img := vgimg.New(8*vg.Inch, 12*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	return writePNG(path, img)
}

// panelPlot is one panel of a chart.
func panelPlot(s Series, p panel) (*plot.Plot, error) {
	pl := plot.New()
	pl.Y.Label.Text = p.title
	pl.Add(stepMarks(s.StepsAtSeconds))
	for i, l := range p.lines {
		xys := l.points(s)
		if len(xys) == 0 {
			continue
		}
		drawn, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		drawn.StepStyle = plotter.PostStep
		drawn.Color = lineColors[i%len(lineColors)]
		pl.Add(drawn)
		if l.name != "" {
			pl.Legend.Add(l.name, drawn)
		}
	}
	pl.Legend.Top, pl.Legend.Left = true, true
	// Every panel spans the whole case from zero; a panel of zeros still
	// has an axis.
	pl.X.Min, pl.Y.Min = 0, 0
	pl.Y.Max = max(pl.Y.Max, 1)
	if n := len(s.Points); n > 0 {
		pl.X.Max = max(pl.X.Max, s.Points[n-1].AtSeconds+s.BucketSeconds)
	}
	return pl, nil
}

// headline tells what happened to a case's books: whole, broken and still
// on their way.
func headline(c CaseReport) string {
	if m := c.Mixed; m != nil {
		return fmt.Sprintf("%s: the interactive tenant's p95 %.2fs, the provider's own %.2fs", c.Case, m.InteractiveP95Seconds, m.ProviderP95Seconds)
	}
	return fmt.Sprintf("%s: %d books whole, %d broken, %d on their way", c.Case, c.CleanBooks, c.BrokenBooks, c.UnfinishedBooks)
}

// points are the line's points of s, for a step line.
func (p line) points(s Series) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range s.Points {
		if y, ok := p.value(pt); ok {
			xys = append(xys, plotter.XY{X: pt.AtSeconds, Y: y})
		}
	}
	if n := len(xys); n > 0 {
		// A step line draws each value until the next point: one more
		// closes the last bucket.
		xys = append(xys, plotter.XY{X: xys[n-1].X + s.BucketSeconds, Y: xys[n-1].Y})
	}
	return xys
}

// stepMarks draws a dashed vertical line at each step of the ramp.
type stepMarks []float64

var _ plot.Plotter = stepMarks(nil)

// Plot draws the marks across the plot's data area.
func (m stepMarks) Plot(c draw.Canvas, p *plot.Plot) {
	style := draw.LineStyle{Color: color.Gray{Y: 160}, Width: vg.Points(0.5), Dashes: []vg.Length{vg.Points(3), vg.Points(3)}}
	x, _ := p.Transforms(&c)
	for _, at := range m {
		c.StrokeLine2(style, x(at), c.Min.Y, x(at), c.Max.Y)
	}
}

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("ramp: chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("ramp: chart %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ramp: chart %s: %w", path, err)
	}
	return nil
}
