package runner

import (
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// httpArgs is a counted http trial's command line with more flags.
func httpArgs(more ...string) []string {
	return append([]string{"--model", "goroutines", "--workload", "http", "--tasks", "1", "--target-url", "http://h:1/p"}, more...)
}

// writeFile writes content to a new file in the test's temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every bad value of the http request's flags is a usage error naming its flag (CONTRACT.md,
// Flags; runner-contract.json httpRequest).
func TestParseFlagsRejectsBadRequests(t *testing.T) {
	t.Setenv("CXLAB_TEST_EMPTY", "")
	t.Setenv("CXLAB_TEST_CRLF", "s3cr3t\r\nX-Injected: 1")
	notPEM := writeFile(t, "not.pem", "no certificate here\n")
	garbage := writeFile(t, "garbage.pem", "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
	caPEM := writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testCertificate(t).Raw})))
	tooMany := []string{}
	for range 17 {
		tooMany = append(tooMany, "--header", "X-A: 1", "--header-env", "X-B=HOME")
	}
	for name, c := range map[string]struct {
		args []string
		flag string
	}{
		"ftp target":                 {httpArgs("--target-url", "ftp://h/"), "--target-url"},
		"https without a host":       {httpArgs("--target-url", "https:///p"), "--target-url"},
		"unknown target mode":        {httpArgs("--target-mode", "proxy"), "--target-mode"},
		"direct ftp target":          {httpArgs("--target-mode", "direct", "--target-url", "ftp://h/"), "--target-url"},
		"method in lower case":       {httpArgs("--method", "get"), "--method"},
		"method not in the list":     {httpArgs("--method", "TRACE"), "--method"},
		"empty method":               {httpArgs("--method", ""), "--method"},
		"header without a colon":     {httpArgs("--header", "X-Token abc"), "--header"},
		"header name with a space":   {httpArgs("--header", "X Token: abc"), "--header"},
		"header name empty":          {httpArgs("--header", ": abc"), "--header"},
		"header name not a token":    {httpArgs("--header", "X(Token): abc"), "--header"},
		"header Host":                {httpArgs("--header", "Host: elsewhere"), "--header"},
		"header content-length":      {httpArgs("--header", "content-LENGTH: 3"), "--header"},
		"header Transfer-Encoding":   {httpArgs("--header", "Transfer-Encoding: chunked"), "--header"},
		"header value with a CR LF":  {httpArgs("--header", "X-A: 1\r\nX-B: 2"), "--header"},
		"header value with a NUL":    {httpArgs("--header", "X-A: 1\x002"), "--header"},
		"header-env without =":       {httpArgs("--header-env", "Authorization"), "--header-env"},
		"header-env without VAR":     {httpArgs("--header-env", "Authorization="), "--header-env"},
		"header-env name not token":  {httpArgs("--header-env", "Author ization=HOME"), "--header-env"},
		"header-env forbidden":       {httpArgs("--header-env", "Connection=HOME"), "--header-env"},
		"header-env VAR unset":       {httpArgs("--header-env", "Authorization=CXLAB_TEST_NEVER_SET"), "CXLAB_TEST_NEVER_SET"},
		"header-env VAR empty":       {httpArgs("--header-env", "Authorization=CXLAB_TEST_EMPTY"), "CXLAB_TEST_EMPTY"},
		"header-env value with CRLF": {httpArgs("--header-env", "Authorization=CXLAB_TEST_CRLF"), "CXLAB_TEST_CRLF"},
		"33 headers":                 {httpArgs(tooMany[:66]...), "--header"},
		"body over 64 KiB":           {httpArgs("--method", "POST", "--body", strings.Repeat("b", 65537)), "--body"},
		"ok-status empty":            {httpArgs("--ok-status", ""), "--ok-status"},
		"ok-status 99":               {httpArgs("--ok-status", "99"), "--ok-status"},
		"ok-status 600":              {httpArgs("--ok-status", "200,600"), "--ok-status"},
		"ok-status a word":           {httpArgs("--ok-status", "2xx"), "--ok-status"},
		"ok-status range reversed":   {httpArgs("--ok-status", "299-200"), "--ok-status"},
		"ok-status range open":       {httpArgs("--ok-status", "200-"), "--ok-status"},
		"ok-status range past 599":   {httpArgs("--ok-status", "500-600"), "--ok-status"},
		"ok-status empty item":       {httpArgs("--ok-status", "200,,304"), "--ok-status"},
		"request-timeout negative":   {httpArgs("--request-timeout", "-1s"), "--request-timeout"},
		"request-timeout over 10m":   {httpArgs("--request-timeout", "10m1ms"), "--request-timeout"},
		"request-timeout bare":       {httpArgs("--request-timeout", "5"), "request-timeout"},
		"tls-ca missing":             {httpArgs("--target-url", "https://h/", "--tls-ca", "/nonexistent/ca.pem"), "--tls-ca"},
		"tls-ca without a cert":      {httpArgs("--target-url", "https://h/", "--tls-ca", notPEM), "--tls-ca"},
		"tls-ca not base64":          {httpArgs("--target-url", "https://h/", "--tls-ca", garbage), "--tls-ca"},
		"tls-ca and insecure":        {httpArgs("--target-url", "https://h/", "--tls-ca", notPEM, "--insecure-skip-verify"), "--insecure-skip-verify"},
		"tls-ca for http://":         {httpArgs("--tls-ca", caPEM), "--tls-ca"},
		"insecure for http://":       {httpArgs("--insecure-skip-verify"), "--insecure-skip-verify"},
		// The http workload's own flags, given with another workload.
		"target-mode with sleep":     {strings.Fields("--model goroutines --workload sleep --tasks 1 --target-mode direct"), "--target-mode"},
		"method with cpu":            {strings.Fields("--model goroutines --workload cpu --tasks 1 --method GET"), "--method"},
		"header with hold":           {strings.Fields("--model goroutines --workload hold --tasks 1 --header X-A:1"), "--header"},
		"header-env with sleep":      {strings.Fields("--model goroutines --workload sleep --tasks 1 --header-env X-A=HOME"), "--header-env"},
		"body with sleep":            {strings.Fields("--model goroutines --workload sleep --tasks 1 --body x"), "--body"},
		"ok-status with sleep":       {strings.Fields("--model goroutines --workload sleep --tasks 1 --ok-status 200"), "--ok-status"},
		"request-timeout with sleep": {strings.Fields("--model goroutines --workload sleep --tasks 1 --request-timeout 1s"), "--request-timeout"},
		"tls-ca with sleep":          {strings.Fields("--model goroutines --workload sleep --tasks 1 --tls-ca x"), "--tls-ca"},
		"insecure with sleep":        {strings.Fields("--model goroutines --workload sleep --workers 1 --duration 1s --insecure-skip-verify"), "--insecure-skip-verify"},
	} {
		_, err := ParseFlags(c.args, io.Discard)
		var usage *UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%s: got %v, want a UsageError naming %s", name, err, c.flag)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the message shows an environment variable's value: %v", name, err)
		}
	}
	// The process's exit status too, and nothing on stdout.
	var stdout, stderr strings.Builder
	if got := Main(httpArgs("--header-env", "Authorization=CXLAB_TEST_CRLF"), &stdout, &stderr); got != ExitUsage || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q; want %d and nothing", got, stdout.String(), ExitUsage)
	}
	if strings.Contains(stderr.String(), "s3cr3t") || !strings.Contains(stderr.String(), "CXLAB_TEST_CRLF") {
		t.Errorf("stderr %q: want VAR named, its value never", stderr.String())
	}
}

func TestParseFlagsTakesRequests(t *testing.T) {
	t.Setenv("CXLAB_TEST_TOKEN", "Bearer abc")
	ca := writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testCertificate(t).Raw})))
	var headers []string
	for i := range 31 {
		headers = append(headers, "--header", "X-N: "+strings.Repeat("v", i))
	}
	for _, args := range [][]string{
		httpArgs("--target-url", "https://h:1/p"),
		httpArgs("--target-mode", "direct", "--target-url", "https://service.example/api/v1/items?page=2"),
		httpArgs("--target-mode", "delay", "--method", "POST", "--body", strings.Repeat("b", 65536),
			"--header", "Content-Type: application/json", "--header", "X-Empty:", "--header", "x-a:b:c",
			"--header-env", "Authorization=CXLAB_TEST_TOKEN"),
		httpArgs(append(headers, "--header-env", "Authorization=CXLAB_TEST_TOKEN")...), // 32: the most
		httpArgs("--ok-status", "200-299,304", "--request-timeout", "10m"),
		httpArgs("--ok-status", "100-599", "--request-timeout", "0s"),
		httpArgs("--ok-status", " 200 , 404-404 ", "--method", "DELETE"),
		httpArgs("--target-url", "https://h/", "--tls-ca", ca),
		httpArgs("--target-url", "https://h/", "--insecure-skip-verify"),
	} {
		if _, err := ParseFlags(args, io.Discard); err != nil {
			t.Errorf("%.200q: %v", args, err)
		}
	}
}

// The request built from the flags: the URL per --target-mode, the headers, the statuses, the
// timeout (0s: the RTT + 2m, the delay target's allowance).
func TestTheRequestFromTheFlags(t *testing.T) {
	t.Setenv("CXLAB_TEST_TOKEN", "  Bearer abc ")
	c, err := ParseFlags(httpArgs("--rtt", "250ms", "--target-url", "https://h:1/p?a=1&b=%2F",
		"--header", "X-A: 1", "--header", "x-a:2", "--header-env", "Authorization=CXLAB_TEST_TOKEN",
		"--ok-status", "200-204,304,500"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.httpRequest()
	if err != nil {
		t.Fatal(err)
	}
	if r.url != "https://h:1/p?a=1&b=%2F&rtt=250ms" || r.method != "GET" || r.timeout != 250*time.Millisecond+2*time.Minute || r.tls != nil {
		t.Errorf("url %s method %s timeout %v tls %v", r.url, r.method, r.timeout, r.tls)
	}
	if got := r.header.Values("X-A"); len(got) != 2 || got[0] != "1" || got[1] != "2" || r.header.Get("Authorization") != "Bearer abc" {
		t.Errorf("headers %v", r.header)
	}
	for code, want := range map[int]bool{199: false, 200: true, 204: true, 205: false, 304: true, 500: true, 501: false, 0: false, 600: false} {
		if r.ok.has(code) != want {
			t.Errorf("status %d counted ok: %v, want %v", code, !want, want)
		}
	}
	c.TargetMode, c.RequestTimeout, c.InsecureSkipVerify = "direct", 3*time.Second, true
	if r, err = c.httpRequest(); err != nil {
		t.Fatal(err)
	}
	if r.url != "https://h:1/p?a=1&b=%2F" || r.timeout != 3*time.Second || r.tls == nil || !r.tls.InsecureSkipVerify {
		t.Errorf("direct: url %s timeout %v tls %+v", r.url, r.timeout, r.tls)
	}
	c.Headers, c.HeaderEnvs = nil, nil
	if r, _ = c.httpRequest(); r.header != nil {
		t.Errorf("headers %v without any given", r.header)
	}
}
