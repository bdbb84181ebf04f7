package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
)

// Config is how the cloud provider reaches the cloud's APIs.
type Config struct {
	// Endpoint is the API's URL (empty: the SDK's, from the region).
	Endpoint string
	// Region overrides the config file's.
	Region string
	// ConfigFile and CredentialsFile are the shared AWS config and credentials files
	// (empty: the SDK's defaults and environment).
	ConfigFile, CredentialsFile string
}

// Cloud is the cloud provider's clients.
type Cloud struct {
	EC2 *ec2.Client
	ELB *elb.Client
}

// New loads the AWS configuration and builds the clients.
func New(ctx context.Context, cfg Config) (*Cloud, error) {
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled)}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.ConfigFile != "" {
		opts = append(opts, awsconfig.WithSharedConfigFiles([]string{cfg.ConfigFile}))
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, awsconfig.WithSharedCredentialsFiles([]string{cfg.CredentialsFile}))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("cloud provider: load aws config: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("cloud provider: the aws config names no region")
	}
	return &Cloud{EC2: ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	}), ELB: elb.NewFromConfig(awsCfg, func(o *elb.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})}, nil
}

// Instances answers about nodes' instances over the cloud's EC2 API.
func (c *Cloud) Instances() Instances { return Instances{EC2: c.EC2} }

// LoadBalancers manages load balancers over the cloud's ELBv2 API.
func (c *Cloud) LoadBalancers() LoadBalancers { return LoadBalancers{ELB: c.ELB, EC2: c.EC2} }
