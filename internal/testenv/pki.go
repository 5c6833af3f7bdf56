package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority of the test world. The control plane has one for its kubelets (a
// cluster's CA in kubeadm's terms): it signs the API server's kubelet client certificate and
// every node's serving certificate, so that each side checks the other as in a real cluster.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	// CertPEM is the CA certificate, PEM-encoded.
	CertPEM []byte
}

// NewCA makes a self-signed CA valid for a day.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pool is a certificate pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// IssueClient signs a client certificate for a user (CN) in groups (O), as the API server reads
// them.
func (ca *CA) IssueClient(user string, groups ...string) (tls.Certificate, error) {
	return ca.issue(pkix.Name{CommonName: user, Organization: groups}, nil, x509.ExtKeyUsageClientAuth)
}

// IssueServing signs a serving certificate for the given IP addresses (a node's, say).
func (ca *CA) IssueServing(commonName string, ips ...string) (tls.Certificate, error) {
	var addrs []net.IP
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return tls.Certificate{}, fmt.Errorf("not an IP address: %q", s)
		}
		addrs = append(addrs, ip)
	}
	return ca.issue(pkix.Name{CommonName: commonName}, addrs, x509.ExtKeyUsageServerAuth)
}

func (ca *CA) issue(subject pkix.Name, ips []net.IP, usage x509.ExtKeyUsage) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// writePEM writes a certificate and its key as PEM files certFile and keyFile in dir.
func writePEM(dir, certFile, keyFile string, c tls.Certificate) error {
	if len(c.Certificate) == 0 {
		return errors.New("empty certificate")
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
