package runner

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The http workload's request (runner-contract.json httpRequest, targetModes); the contract
// test checks these against it.
var (
	targetModes = []string{"delay", "direct"}
	httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	// Header names the runner sets itself or that would change the framing of the exchange,
	// lower case (compared case-insensitively).
	forbiddenHeaders = []string{"connection", "content-length", "expect", "host", "keep-alive",
		"proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)

const (
	maxHeaders = 32 // --header and --header-env together
	// An answer's head, its status line to its blank line, with any interim answers' heads
	// before it, at most (httpResponse.maxHeaderBytes): what net/http's Transport counts.
	maxResponseHeaderBytes = 1 << 20
	maxBody                = 64 << 10         // --body, bytes (limits.body)
	maxRequestTimeout      = 10 * time.Minute // --request-timeout (limits.request-timeout)
	defaultOKStatus        = "200-299"
	minStatus              = 100
	maxStatus              = 599
)

// httpFlags are the flags that mean something only to the http workload and that came with the
// contract's requests to the user's own service: given with another workload, each is a usage
// error. (--target-url and --connection, older, are ignored there as they always were.)
var httpFlags = []string{"target-mode", "method", "header", "header-env", "body", "ok-status",
	"request-timeout", "tls-ca", "insecure-skip-verify"}

// repeated is a flag that may be given many times, each value kept in order.
type repeated []string

func (r *repeated) String() string {
	if r == nil {
		return ""
	}
	return strings.Join(*r, ", ")
}

func (r *repeated) Set(v string) error {
	*r = append(*r, v)
	return nil
}

// httpRequest is the request every task of the http workload sends, built once from the flags
// (Config.httpRequest), which it has checked.
type httpRequest struct {
	method  string
	url     string
	header  http.Header // nil when no header was given; shared by every request, never written
	body    string
	ok      statusSet
	timeout time.Duration // the whole request: connecting, TLS, sending, the answer and its body
	tls     *tls.Config   // nil: Go's default, the system's roots
}

// httpRequest builds the request from the flags; each error names its flag and never holds the
// value of an environment variable.
func (c *Config) httpRequest() (*httpRequest, error) {
	r := &httpRequest{method: c.Method, body: c.Body, timeout: c.RequestTimeout}
	var err error
	if r.url, err = requestURL(c.TargetURL, c.TargetMode, c.RTT); err != nil {
		return nil, fmt.Errorf("--target-url: %v", err)
	}
	if !slices.Contains(targetModes, c.TargetMode) {
		return nil, fmt.Errorf("unknown --target-mode %q (want one of %v)", c.TargetMode, targetModes)
	}
	if !slices.Contains(httpMethods, c.Method) {
		return nil, fmt.Errorf("unknown --method %q (want one of %v)", c.Method, httpMethods)
	}
	if r.header, err = requestHeader(c.Headers, c.HeaderEnvs); err != nil {
		return nil, err
	}
	if len(c.Body) > maxBody {
		return nil, fmt.Errorf("--body must be at most %d bytes, got %d", maxBody, len(c.Body))
	}
	if r.ok, err = parseStatuses(c.OKStatus); err != nil {
		return nil, fmt.Errorf("--ok-status: %v", err)
	}
	switch {
	case c.RequestTimeout < 0 || c.RequestTimeout > maxRequestTimeout:
		return nil, fmt.Errorf("--request-timeout must be 0s..%v, got %v", maxRequestTimeout, c.RequestTimeout)
	case c.RequestTimeout == 0:
		r.timeout = c.RTT + httpTimeout // the delay target's allowance
	}
	if r.tls, err = tlsConfig(c.TLSCA, c.InsecureSkipVerify); err != nil {
		return nil, err
	}
	if r.tls != nil && !strings.HasPrefix(c.TargetURL, "https://") {
		flag := map[bool]string{true: "--insecure-skip-verify", false: "--tls-ca"}[c.InsecureSkipVerify]
		return nil, fmt.Errorf("%s applies to an https:// --target-url, not %q", flag, c.TargetURL)
	}
	return r, nil
}

// requestURL is the URL every task requests: the target with rtt=<rtt> set in its query, other
// parameters kept (--target-mode delay), or the target exactly as given (direct).
func requestURL(target, mode string, rtt time.Duration) (string, error) {
	if mode == "direct" {
		if _, err := checkTarget(target); err != nil {
			return "", err
		}
		return target, nil
	}
	return taskURL(target, rtt)
}

// checkTarget parses an http:// or https:// URL with a host.
func checkTarget(target string) (*url.URL, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(urlSchemes, u.Scheme) || u.Hostname() == "" {
		return nil, fmt.Errorf("want an http:// or https:// URL with a host, got %q", target)
	}
	return u, nil
}

// requestHeader builds the headers of --header 'Name: value' and --header-env 'Name=VAR', in
// that order; nil for none. A name may repeat: each is sent.
func requestHeader(literal, fromEnv []string) (http.Header, error) {
	if n := len(literal) + len(fromEnv); n > maxHeaders {
		return nil, fmt.Errorf("--header and --header-env: %d headers, at most %d", n, maxHeaders)
	}
	if len(literal)+len(fromEnv) == 0 {
		return nil, nil
	}
	h := http.Header{}
	for _, s := range literal {
		name, value, found := strings.Cut(s, ":")
		if !found {
			return nil, fmt.Errorf("--header %q: want 'Name: value'", s)
		}
		if err := checkHeaderName(name); err != nil {
			return nil, fmt.Errorf("--header %q: %v", s, err)
		}
		value = strings.Trim(value, " \t")
		if !validFieldValue(value) {
			return nil, fmt.Errorf("--header %q: the value holds a control character (CR, LF, NUL...)", s)
		}
		h.Add(name, value)
	}
	for _, s := range fromEnv {
		name, variable, found := strings.Cut(s, "=")
		if !found || variable == "" {
			return nil, fmt.Errorf("--header-env %q: want 'Name=VAR', VAR an environment variable", s)
		}
		if err := checkHeaderName(name); err != nil {
			return nil, fmt.Errorf("--header-env %q: %v", s, err)
		}
		// The value is a secret: no message says it, only the variable's name.
		value := strings.Trim(os.Getenv(variable), " \t")
		if value == "" {
			return nil, fmt.Errorf("--header-env %s=%s: the environment variable %s is unset or empty", name, variable, variable)
		}
		if !validFieldValue(value) {
			return nil, fmt.Errorf("--header-env %s=%s: the value of %s holds a control character (CR, LF, NUL...)", name, variable, variable)
		}
		h.Add(name, value)
	}
	return h, nil
}

// checkHeaderName refuses a name that is no RFC 9110 token or that the runner must not be
// given (forbiddenHeaders, case-insensitive).
func checkHeaderName(name string) error {
	if !isToken(name) {
		return fmt.Errorf("the name %q is not an RFC 9110 token", name)
	}
	if slices.Contains(forbiddenHeaders, strings.ToLower(name)) {
		return fmt.Errorf("%s is set by the runner itself or changes the framing: not one of %v", name, forbiddenHeaders)
	}
	return nil
}

// isToken: RFC 9110 token = 1*tchar, tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" /
// "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}

// validFieldValue: RFC 9110 field-value, VCHAR, obs-text, SP and HTAB; no other control.
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' && b != '\t' || b == 0x7f {
			return false
		}
	}
	return true
}

// statusSet holds the statuses that count as success, 100-599.
type statusSet [maxStatus + 1]bool

func (s *statusSet) has(code int) bool { return code >= minStatus && code <= maxStatus && s[code] }

// parseStatuses reads --ok-status: codes and inclusive ranges, comma-separated (200-299,304),
// each 100-599.
func parseStatuses(list string) (statusSet, error) {
	var set statusSet
	code := func(s string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < minStatus || n > maxStatus {
			return 0, fmt.Errorf("want a status %d..%d, got %q", minStatus, maxStatus, s)
		}
		return n, nil
	}
	for _, item := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		from, err := code(lo)
		if err != nil {
			return set, fmt.Errorf("%q: %v", list, err)
		}
		to := from
		if isRange {
			if to, err = code(hi); err != nil {
				return set, fmt.Errorf("%q: %v", list, err)
			}
			if to < from {
				return set, fmt.Errorf("%q: the range %s ends before it starts", list, strings.TrimSpace(item))
			}
		}
		for c := from; c <= to; c++ {
			set[c] = true
		}
	}
	return set, nil
}

// tlsConfig is the TLS of an https target: the CAs of --tls-ca instead of the system's, or no
// check at all with --insecure-skip-verify; nil (Go's default) for neither.
func tlsConfig(caFile string, insecure bool) (*tls.Config, error) {
	switch {
	case caFile != "" && insecure:
		return nil, fmt.Errorf("--insecure-skip-verify checks no certificate: leave --tls-ca out beside it")
	case insecure:
		return &tls.Config{InsecureSkipVerify: true}, nil // asked for: a test service's own certificate
	case caFile == "":
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: roots}, nil
}
