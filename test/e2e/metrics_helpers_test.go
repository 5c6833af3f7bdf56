package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape is one scrape of a metrics endpoint: the raw text and every sample by
// `name{label="value",…}` (labels sorted).
type scrape struct {
	text    string
	samples map[string]float64
}

func (s scrape) get(name string, labels ...string) (float64, bool) {
	v, ok := s.samples[seriesKey(name, labels...)]
	return v, ok
}

func seriesKey(name string, labels ...string) string {
	var ls []string
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// scrapeMetrics reads http://addr/metrics.
func scrapeMetrics(ctx context.Context, addr string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return scrape{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return scrape{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return scrape{}, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return scrape{}, err
	}
	s := scrape{text: string(body), samples: map[string]float64{}}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName(), l.GetValue())
			}
			switch {
			case m.GetGauge() != nil:
				s.samples[seriesKey(name, labels...)] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				s.samples[seriesKey(name, labels...)] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				s.samples[seriesKey(name+"_count", labels...)] = float64(m.GetHistogram().GetSampleCount())
				s.samples[seriesKey(name+"_sum", labels...)] = m.GetHistogram().GetSampleSum()
				for _, bk := range m.GetHistogram().GetBucket() {
					le := fmt.Sprint(bk.GetUpperBound())
					s.samples[seriesKey(name+"_bucket", append(slices.Clone(labels), "le", le)...)] = float64(bk.GetCumulativeCount())
				}
			}
		}
	}
	return s, nil
}

// scraper scrapes addr every 200 ms in the background and remembers every value a series took.
type scraper struct {
	mu     sync.Mutex
	values map[string]map[float64]bool
	texts  []string
	stop   context.CancelFunc
	done   chan struct{}
}

func startScraper(ctx context.Context, addr string) *scraper {
	ctx, cancel := context.WithCancel(ctx)
	s := &scraper{values: map[string]map[float64]bool{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			if sc, err := scrapeMetrics(ctx, addr); err == nil {
				s.mu.Lock()
				for k, v := range sc.samples {
					if s.values[k] == nil {
						s.values[k] = map[float64]bool{}
					}
					s.values[k][v] = true
				}
				s.texts = append(s.texts, sc.text)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return s
}

// took reports whether the series was seen with value v.
func (s *scraper) took(v float64, name string, labels ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.values[seriesKey(name, labels...)][v]
}

func (s *scraper) end() { s.stop(); <-s.done }

// all returns every scraped text (to look for secrets in).
func (s *scraper) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.texts, "")
}

// httpStatus returns the status code of GET http://addr/path.
func httpStatus(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// quantile estimates the q-quantile of a histogram summed over all its series, as PromQL's
// histogram_quantile does (linear within the bucket).
func (s scrape) quantile(q float64, name string) float64 {
	byLE := map[float64]float64{}
	for k, v := range s.samples {
		if !strings.HasPrefix(k, name+"_bucket{") {
			continue
		}
		m := regexp.MustCompile(`le="([^"]+)"`).FindStringSubmatch(k)
		if m == nil {
			continue
		}
		le, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			continue
		}
		byLE[le] += v
	}
	les := slices.Sorted(maps.Keys(byLE))
	if len(les) == 0 {
		return math.NaN()
	}
	total := 0.0
	for k, v := range s.samples {
		if strings.HasPrefix(k, name+"_count{") {
			total += v
		}
	}
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	prevLE, prevCount := 0.0, 0.0
	for _, le := range les {
		if c := byLE[le]; c >= rank {
			if math.IsInf(le, 1) {
				return prevLE
			}
			return prevLE + (le-prevLE)*(rank-prevCount)/math.Max(c-prevCount, 1e-12)
		}
		prevLE, prevCount = le, byLE[le]
	}
	return prevLE
}
