package harness

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Samples reads /metrics: every sample, keyed by its name and labels as
// Prometheus prints them (`name{a="b"}`).
func Samples(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		f, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out[line[:i]] = f
	}
	return out
}

// Scrape reads one sample from /metrics, which must be there.
func Scrape(t testing.TB, addr, sample string) float64 {
	t.Helper()
	v, ok := Samples(t, addr)[sample]
	if !ok {
		t.Fatalf("no %s in /metrics", sample)
	}
	return v
}

// ScrapeLabelled sums the series of metric whose labels contain label; 0
// when there is none yet.
func ScrapeLabelled(t testing.TB, addr, metric, label string) float64 {
	t.Helper()
	sum := 0.0
	for k, v := range Samples(t, addr) {
		if strings.HasPrefix(k, metric+"{") && strings.Contains(k, label) {
			sum += v
		}
	}
	return sum
}

// MetricSum adds the Samples of metric whose labels hold match, from
// the Prometheus text at addr's /metrics.
func MetricSum(t testing.TB, addr, metric, match string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, match) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}

// MetricSamples are the Samples of a /metrics page, by series.
type MetricSamples map[string]float64

// ScrapeMetrics reads a /metrics page; unlike Samples, it returns its
// error, for a poll across a pod's restart.
func ScrapeMetrics(addr string) (MetricSamples, error) {
	resp, err := metricsClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	m := MetricSamples{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		m[line[:i]] = v
	}
	return m, nil
}

// MustMetrics is ScrapeMetrics that fails t.
func MustMetrics(t testing.TB, addr string) MetricSamples {
	t.Helper()
	m, err := ScrapeMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sum adds the series of metric, with or without labels.
func (m MetricSamples) Sum(metric string) float64 { return m.SumWith(metric, "") }

// sumWith adds the series of metric whose labels contain label.
func (m MetricSamples) SumWith(metric, label string) float64 {
	total := 0.0
	for k, v := range m {
		if (k == metric || strings.HasPrefix(k, metric+"{")) && strings.Contains(k, label) {
			total += v
		}
	}
	return total
}

// byLabel adds the series of metric whose labels contain filter, by the
// value of label.
func (m MetricSamples) ByLabel(metric, label, filter string) map[string]float64 {
	by := map[string]float64{}
	for k, v := range m {
		if !strings.HasPrefix(k, metric+"{") || !strings.Contains(k, filter) {
			continue
		}
		_, rest, ok := strings.Cut(k, label+`="`)
		if !ok {
			continue
		}
		value, _, _ := strings.Cut(rest, `"`)
		by[value] += v
	}
	return by
}

// series lists the Samples of the metrics, one a line, sorted.
func (m MetricSamples) Series(metrics ...string) string {
	var lines []string
	for k, v := range m {
		for _, metric := range metrics {
			if strings.HasPrefix(k, metric+"{") {
				lines = append(lines, fmt.Sprintf("%s %v", k, v))
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// metricsClient bounds a Scrape: a replica that stopped answering fails
// the Scrape rather than hanging the test.
var metricsClient = &http.Client{Timeout: 5 * time.Second}

// Median is the middle value of v (the mean of the two middle ones for
// an even count).
func Median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Millis is d in milliseconds, for reports.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
