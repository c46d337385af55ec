"""Kernel-writing helpers of ``_pre_prod_kernels`` (see ``kernel_helpers``)."""
