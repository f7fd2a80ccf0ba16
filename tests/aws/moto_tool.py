"""What the aws provider's tests ask moto_server, through boto3 (moto's own
dependency), independently of the plugin's EC2 client.

  moto_tool.py setup ENDPOINT   -> {"access_key_id", "secret_access_key", "image", "security_group", "subnet"}
      an IAM user allowed everything, with an access key. moto_server runs
      with INITIAL_NO_AUTH_ACTION_COUNT=3, so these three calls are the only
      ones it takes unsigned; every later request must be signed with a key
      IAM knows.
  moto_tool.py state ENDPOINT KEY SECRET    -> {"instances": [...], "key_pairs": [...]}
  moto_tool.py import-key ENDPOINT KEY SECRET NAME PUBLIC_KEY_FILE
      an operator's own key pair, as `aws ec2 import-key-pair` makes it
"""
import json
import sys

import boto3


def client(service, endpoint, key="weft-setup", secret="weft-setup"):
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=key, aws_secret_access_key=secret)


def setup(endpoint):
    iam = client("iam", endpoint)
    iam.create_user(UserName="weft")
    iam.put_user_policy(UserName="weft", PolicyName="everything", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="weft")["AccessKey"]
    ec2 = client("ec2", endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    # One of the images moto ships, for the image type; a security group and
    # the default VPC's first subnet, for the provider's fields.
    image = sorted(i["ImageId"] for i in ec2.describe_images(Owners=["amazon"])["Images"])[0]
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    group = ec2.create_security_group(GroupName="weft-nodes", Description="weft test nodes", VpcId=vpc)["GroupId"]
    subnet = sorted(s["SubnetId"] for s in ec2.describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"])[0]
    return {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"],
            "image": image, "security_group": group, "subnet": subnet}


def state(endpoint, key, secret):
    ec2 = client("ec2", endpoint, key, secret)
    instances = []
    for page in ec2.get_paginator("describe_instances").paginate():
        for reservation in page["Reservations"]:
            for i in reservation["Instances"]:
                instances.append({
                    "id": i["InstanceId"], "state": i["State"]["Name"], "type": i["InstanceType"],
                    "image": i["ImageId"], "key_name": i.get("KeyName", ""),
                    "tags": {t["Key"]: t["Value"] for t in i.get("Tags", [])},
                    "security_groups": sorted(g["GroupId"] for g in i.get("SecurityGroups", [])),
                    "subnet": i.get("SubnetId", ""),
                    "volumes": [m["Ebs"]["VolumeId"] for m in i.get("BlockDeviceMappings", []) if "Ebs" in m],
                })
    sizes = {}
    for v in ec2.describe_volumes()["Volumes"]:
        sizes[v["VolumeId"]] = v["Size"]
    for i in instances:
        i["volume_sizes"] = [sizes.get(v, 0) for v in i.pop("volumes")]
    key_pairs = [{"name": k["KeyName"], "fingerprint": k.get("KeyFingerprint", "")}
                 for k in ec2.describe_key_pairs()["KeyPairs"]]
    return {"instances": instances, "key_pairs": key_pairs}


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        print(json.dumps(setup(sys.argv[2])))
    elif sys.argv[1] == "state":
        print(json.dumps(state(sys.argv[2], sys.argv[3], sys.argv[4])))
    elif sys.argv[1] == "import-key":
        with open(sys.argv[6], "rb") as f:
            client("ec2", sys.argv[2], sys.argv[3], sys.argv[4]).import_key_pair(
                KeyName=sys.argv[5], PublicKeyMaterial=f.read())
    else:
        sys.exit("unknown command " + sys.argv[1])
