package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Parsing an external cluster's endpoints and TLS files.

// parseEndpoints wants http(s)://host:port URLs, all of one scheme.
func parseEndpoints(eps []string) ([]*url.URL, error) {
	if len(eps) == 0 {
		return nil, errors.New("--endpoints: none given")
	}
	var urls []*url.URL
	for _, ep := range eps {
		u, err := url.Parse(ep)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Port() == "" ||
			u.Hostname() == "" || strings.Trim(u.Path, "/") != "" || u.User != nil || u.RawQuery != "" {
			return nil, fmt.Errorf("--endpoints %s: want a client URL, http(s)://host:port", ep)
		}
		if len(urls) > 0 && u.Scheme != urls[0].Scheme {
			return nil, fmt.Errorf("--endpoints %s: %s, but %s is %s: all http or all https", ep, u.Scheme, urls[0], urls[0].Scheme)
		}
		u.Path = ""
		urls = append(urls, u)
	}
	return urls, nil
}

// loadTLS reads the TLS files. direct dials the members at their own URLs
// and verifies as usual; proxied dials them through proxies, whose
// addresses no member certificate names, so that Go's own host name check
// would refuse every one: it skips that check and does the whole
// verification itself (verifyAnyHost).
func loadTLS(cfg ExternalConfig, urls []*url.URL) (direct, proxied *tls.Config, err error) {
	var roots *x509.CertPool // nil: the system's
	if cfg.CACert != "" {
		ca, err := readPEM("--cacert", cfg.CACert)
		if err != nil {
			return nil, nil, err
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return nil, nil, fmt.Errorf("--cacert %s: no certificate in it", cfg.CACert)
		}
	}
	var certs []tls.Certificate
	switch {
	case cfg.Cert != "" && cfg.Key == "":
		return nil, nil, fmt.Errorf("--cert %s: needs its --key", cfg.Cert)
	case cfg.Key != "" && cfg.Cert == "":
		return nil, nil, fmt.Errorf("--key %s: needs its --cert", cfg.Key)
	case cfg.Cert != "":
		certPEM, err := readPEM("--cert", cfg.Cert)
		if err != nil {
			return nil, nil, err
		}
		keyPEM, err := readPEM("--key", cfg.Key)
		if err != nil {
			return nil, nil, err
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, fmt.Errorf("--cert %s, --key %s: %v", cfg.Cert, cfg.Key, err)
		}
		certs = []tls.Certificate{pair}
	}
	var hosts []string
	for _, u := range urls {
		if !slices.Contains(hosts, u.Hostname()) {
			hosts = append(hosts, u.Hostname())
		}
	}
	direct = &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}
	proxied = &tls.Config{
		Certificates:       certs,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verifyAnyHost verifies instead, fully
		VerifyConnection:   verifyAnyHost(roots, hosts),
	}
	return direct, proxied, nil
}

// readPEM reads file, the value of flag, and checks that it is PEM.
func readPEM(flag, file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s %s: %v", flag, file, err)
	}
	if blk, _ := pem.Decode(b); blk == nil {
		return nil, fmt.Errorf("%s %s: not PEM", flag, file)
	}
	return b, nil
}

// verifyAnyHost verifies a member's certificate chain against roots (nil:
// the system's) and accepts the certificate when it is valid for any of
// hosts, the endpoints' host names: a client reaches a member through a
// proxy, at an address that is not the member's.
func verifyAnyHost(roots *x509.CertPool, hosts []string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the member sent no certificate")
		}
		leaf := cs.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
			return err
		}
		for _, h := range hosts {
			if leaf.VerifyHostname(h) == nil {
				return nil
			}
		}
		return fmt.Errorf("x509: the member's certificate is valid for none of the endpoints' hosts (%s)", strings.Join(hosts, ", "))
	}
}
