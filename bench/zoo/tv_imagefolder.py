# SPDX-License-Identifier: MIT
"""torchvision's ImageFolder with the ImageNet training transforms of torchvision's classification
reference (references/classification/presets.py, ClassificationPresetTrain: RandomResizedCrop 224,
RandomHorizontalFlip, PILToTensor, ConvertImageDtype, Normalize), behind a torch DataLoader.
Data: 320 generated 160x160 JPEGs in 4 class folders (about 3 MB)."""

import torch
import torchvision
from torchvision import transforms

import zoo_common as zc


def main():
    args = zc.parse(__doc__.splitlines()[0], scalable=True)
    zc.start(args)
    n = zc.scaled(args, 320)
    data = zc.Data(args, zc.tag(args, "tv_imagefolder-320-160"),
                   lambda r: zc.make_image_folder(r, n, 4, (160, 160)))
    with data as root:
        torch.manual_seed(args.seed)
        tf = transforms.Compose([
            transforms.RandomResizedCrop(224, interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.RandomHorizontalFlip(0.5),
            transforms.PILToTensor(),
            transforms.ConvertImageDtype(torch.float),
            transforms.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
        ])
        ds = torchvision.datasets.ImageFolder(root, transform=tf)
        loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True,
                                             num_workers=args.workers, pin_memory=False,
                                             **zc.loader_kwargs(args))
        epochs, digest = zc.run_epochs(args, lambda e: loader)
        zc.emit("tv_imagefolder", args, epochs, digest, data, ("torchvision",))


if __name__ == "__main__":
    main()
