// Package localetcd starts an etcd server inside the calling process, on
// loopback: one member, its data in a directory of its own, fsync off. It
// is for trying etcdsem without an etcd of one's own (the localetcd
// command) and for the package's examples, never for data that matters.
package localetcd

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is an etcd server started by Start.
type Server struct {
	etcd    *embed.Etcd
	dir     string
	tempDir bool
	// Endpoint is the URL clients dial: clientv3.Config{Endpoints:
	// []string{s.Endpoint}}.
	Endpoint string
}

// Start starts a server that serves clients on addr ("127.0.0.1:2379"; a
// free loopback port if empty) and keeps its data in dir (a new temporary
// directory, removed by Close, if empty), and returns once it serves. addr
// must be a loopback address.
func Start(addr, dir string) (*Server, error) {
	if addr == "" {
		var err error
		if addr, err = freeLoopback(); err != nil {
			return nil, err
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("localetcd: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("localetcd: %s is not a loopback address", addr)
	}
	peer, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if dir == "" {
		if s.dir, err = os.MkdirTemp("", "localetcd"); err != nil {
			return nil, err
		}
		s.tempDir = true
	}
	clientURL := url.URL{Scheme: "http", Host: addr}
	peerURL := url.URL{Scheme: "http", Host: peer}
	cfg := embed.NewConfig()
	cfg.Name = "localetcd"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if s.etcd, err = embed.StartEtcd(cfg); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("localetcd: %w", err)
	}
	select {
	case <-s.etcd.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		s.Close()
		return nil, fmt.Errorf("localetcd: etcd did not become ready within 20 s")
	}
	s.Endpoint = clientURL.String()
	return s, nil
}

// Close stops the server, and removes its data directory if Start made
// it.
func (s *Server) Close() {
	s.etcd.Close()
	s.removeDir()
}

func (s *Server) removeDir() {
	if s.tempDir {
		os.RemoveAll(s.dir)
	}
}

// freeLoopback returns a loopback address with a port nothing listens on
// now.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
