package vps

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/better-compute/better-compute/internal/provision"
)

// Create returns the instance tagged with the machine's id if there is one, or launches it.
func (p *provider) Create(ctx context.Context, req provision.CreateRequest) (provision.Machine, error) {
	if err := checkRequest(req); err != nil {
		return provision.Machine{}, provision.Permanent(err)
	}
	if m, ok, err := p.byClientToken(ctx, req.ClientToken); err != nil || ok {
		return m, err
	}
	ud, err := userData(p.params, p.key, req)
	if err != nil {
		return provision.Machine{}, provision.Permanent(err)
	}
	tags := p.tags(req)
	in := &ec2.RunInstancesInput{
		ImageId:      aws.String(p.params.ImageID),
		InstanceType: types.InstanceType(p.params.InstanceType),
		MinCount:     aws.Int32(1),
		MaxCount:     aws.Int32(1),
		ClientToken:  aws.String(req.ClientToken),
		UserData:     aws.String(base64.StdEncoding.EncodeToString(ud)),
		MetadataOptions: &types.InstanceMetadataOptionsRequest{
			HttpTokens: types.HttpTokensStateRequired, HttpEndpoint: types.InstanceMetadataEndpointStateEnabled,
		},
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tags},
			{ResourceType: types.ResourceTypeVolume, Tags: tags},
		},
	}
	if p.params.SubnetID != "" {
		in.SubnetId = aws.String(p.params.SubnetID)
	}
	if len(p.params.SecurityGroupIDs) > 0 {
		in.SecurityGroupIds = p.params.SecurityGroupIDs
	}
	if p.params.KeyName != "" {
		in.KeyName = aws.String(p.params.KeyName)
	}
	out, err := p.ec2.RunInstances(ctx, in)
	if err != nil {
		return provision.Machine{}, classify("run an instance for machine "+req.ClientToken, err)
	}
	if len(out.Instances) != 1 {
		return provision.Machine{}, fmt.Errorf("ec2: run an instance for machine %s: %d instances in the answer, want 1", req.ClientToken, len(out.Instances))
	}
	return machineOf(out.Instances[0]), nil
}

// tags are the request's tags, the class's extra tags and Name (the machine's name).
func (p *provider) tags(req provision.CreateRequest) []types.Tag {
	all := maps.Clone(p.params.Tags)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, req.Tags)
	all[provision.TagMachine] = req.ClientToken
	if req.Name != "" {
		all["Name"] = req.Name
	}
	out := make([]types.Tag, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(all[k])})
	}
	return out
}

// byClientToken finds the instance an earlier Create made for the machine: the live one if
// any, else a terminated one (EC2 answers a client token with its instance, terminated or not).
func (p *provider) byClientToken(ctx context.Context, token string) (provision.Machine, bool, error) {
	ms, err := p.describe(ctx, "find machine "+token+"'s instance", &ec2.DescribeInstancesInput{
		Filters: []types.Filter{{Name: aws.String("tag:" + provision.TagMachine), Values: []string{token}}},
	})
	if err != nil || len(ms) == 0 {
		return provision.Machine{}, false, err
	}
	slices.SortStableFunc(ms, func(a, b provision.Machine) int {
		return boolInt(a.State == provision.ProviderGone) - boolInt(b.State == provision.ProviderGone)
	})
	return ms[0], true, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Get returns the instance unless it is terminated (ErrNotFound then, as for an unknown id).
func (p *provider) Get(ctx context.Context, providerID string) (provision.Machine, error) {
	ms, err := p.describe(ctx, "describe instance "+providerID, &ec2.DescribeInstancesInput{InstanceIds: []string{providerID}})
	if err != nil {
		return provision.Machine{}, err
	}
	for _, m := range ms {
		if m.ProviderID == providerID && m.State != provision.ProviderGone {
			return m, nil
		}
	}
	return provision.Machine{}, fmt.Errorf("ec2: instance %s: %w", providerID, provision.ErrNotFound)
}

// Power starts, stops or reboots the instance; a reset of a stopped instance starts it.
func (p *provider) Power(ctx context.Context, providerID string, action provision.PowerAction) error {
	m, err := p.Get(ctx, providerID)
	if err != nil {
		return err
	}
	ids := []string{providerID}
	switch {
	case action == provision.PowerOn || (action == provision.PowerReset && m.State == provision.ProviderStopped):
		_, err = p.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: ids})
	case action == provision.PowerOff:
		_, err = p.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: ids})
	case action == provision.PowerReset:
		_, err = p.ec2.RebootInstances(ctx, &ec2.RebootInstancesInput{InstanceIds: ids})
	default:
		return provision.Permanent(fmt.Errorf("ec2: unknown power action %q", action))
	}
	return classify(fmt.Sprintf("power %s instance %s", action, providerID), err)
}

// Delete terminates the instance; an unknown or terminated instance is already deleted.
func (p *provider) Delete(ctx context.Context, providerID string) error {
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{providerID}})
	if err = classify("terminate instance "+providerID, err); errors.Is(err, provision.ErrNotFound) {
		return nil
	}
	return err
}

// List lists the instances that are not terminated and carry the deployment tag. The contract's
// List does not say which deployment asks, so every deployment's instances are listed, each
// with its tags: callers keep those whose provision.TagDeployment is theirs.
func (p *provider) List(ctx context.Context) ([]provision.Machine, error) {
	ms, err := p.describe(ctx, "list the deployment's instances", &ec2.DescribeInstancesInput{
		Filters: []types.Filter{{Name: aws.String("tag-key"), Values: []string{provision.TagDeployment}}},
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ms, func(m provision.Machine) bool { return m.State == provision.ProviderGone }), nil
}

// describe runs DescribeInstances through every page.
func (p *provider) describe(ctx context.Context, what string, in *ec2.DescribeInstancesInput) ([]provision.Machine, error) {
	var out []provision.Machine
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, classify(what, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, machineOf(i))
			}
		}
	}
	return out, nil
}

// machineOf is the provider's view of an instance.
func machineOf(i types.Instance) provision.Machine {
	m := provision.Machine{ProviderID: aws.ToString(i.InstanceId), Tags: map[string]string{}, State: provision.ProviderPending}
	for _, t := range i.Tags {
		m.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	if i.State != nil {
		switch i.State.Name {
		case types.InstanceStateNameRunning:
			m.State = provision.ProviderRunning
		case types.InstanceStateNameStopping, types.InstanceStateNameStopped:
			m.State = provision.ProviderStopped
		case types.InstanceStateNameShuttingDown, types.InstanceStateNameTerminated:
			m.State = provision.ProviderGone
		}
	}
	for _, a := range []*string{i.PrivateIpAddress, i.PublicIpAddress, i.Ipv6Address} {
		if s := aws.ToString(a); s != "" {
			m.Addresses = append(m.Addresses, s)
		}
	}
	return m
}
