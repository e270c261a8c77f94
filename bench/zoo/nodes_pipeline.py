# SPDX-License-Identifier: MIT
"""torchdata.nodes, the pipeline of its documentation (SamplerWrapper → ParallelMapper over the
dataset's __getitem__ → Batcher → Mapper(collate) → Prefetcher → Loader), with a process
ParallelMapper of --workers workers started by --start-method, over a torchvision ImageFolder.
Data: 384 generated 96x96 JPEGs in 4 class folders (about 2 MB)."""

import torch
import torchvision
from torch.utils.data import RandomSampler, default_collate
from torchdata import nodes
from torchvision import transforms

import zoo_common as zc


def main():
    args = zc.parse(__doc__.splitlines()[0])
    zc.start(args)
    data = zc.Data(args, "nodes_pipeline-384-96",
                   lambda r: zc.make_image_folder(r, 384, 4, (96, 96)))
    with data as root:
        torch.manual_seed(args.seed)
        tf = transforms.Compose([transforms.RandomResizedCrop(128), transforms.RandomHorizontalFlip(),
                                 transforms.ToTensor(),
                                 transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
        ds = torchvision.datasets.ImageFolder(root, transform=tf)
        node = nodes.SamplerWrapper(RandomSampler(ds, generator=torch.Generator().manual_seed(args.seed)))
        if args.workers > 0:
            node = nodes.ParallelMapper(node, map_fn=ds.__getitem__, num_workers=args.workers,
                                        method="process", multiprocessing_context=args.start_method)
        else:
            node = nodes.Mapper(node, map_fn=ds.__getitem__)
        node = nodes.Batcher(node, batch_size=32, drop_last=False)
        node = nodes.Mapper(node, map_fn=default_collate)
        node = nodes.Prefetcher(node, prefetch_factor=2)
        loader = nodes.Loader(node)
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("nodes_pipeline", args, epochs, digest, data, ("torchdata", "torchvision"))


if __name__ == "__main__":
    main()
