"""Beside the product: the adapters through which ``lycaon bench`` runs the same work on a peer
library (``seal_peer``, ``seal_ckks_peer``: SEAL via TenSEAL; ``lattigo_peer``: Lattigo as
orion-fhe ships it; ``orion_peer``: Orion; ``spu_peer``: SecretFlow SPU's CHEETAH) and the PyTorch
networks and training loop helpers of ``scripts/train_*.py`` (``torch_models``,
``torch_training``).

Nothing here is imported at package import: each peer library is imported only when its adapter
runs, and ``orion_peer`` runs in an interpreter of its own without Lycaon.
"""
